// The kernel harness (kiln/diagnostics.h, CheckKernels): every registered CPU kernel against its
// op's reference kernel on the op's own cases (src/ops/**: KILN_REGISTER_OP_CASES). The second
// half proves the harness can fail: kernels registered here on a test backend ("proof", a host
// memory device, so the device path runs too) that write a wrong value, skip an element, write
// past the output, change an input, decline every case, or belong to an op without cases.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "core/test_backend.h"
#include "ir/op.h"
#include "kiln/diagnostics.h"
#include "ops/op_cases.h"
#include "runtime/device.h"
#include "runtime/kernel.h"

namespace kiln {
namespace {

std::string Describe(const KernelCheckReport& r) {
  std::string s;
  for (const auto& x : r.results)
    if (!x.ok) s += "FAIL " + x.kernel + " on '" + x.case_name + "': " + x.detail + "\n";
  for (const auto& x : r.without_cases) s += "NO CASES " + x + "\n";
  for (const auto& x : r.never_ran) s += "NEVER RAN " + x + "\n";
  return s;
}

// KILN_HARNESS_KERNELS=cpu.conv.onednn,cpu.matmul.onednn checks only those (while writing cases);
// KILN_HARNESS_VERBOSE=1 prints every run.
std::vector<std::string> KernelsFromEnv() {
  std::vector<std::string> out;
  const char* v = std::getenv("KILN_HARNESS_KERNELS");
  for (std::string s = v ? v : ""; !s.empty();) {
    const size_t comma = s.find(',');
    out.push_back(s.substr(0, comma));
    s = comma == std::string::npos ? "" : s.substr(comma + 1);
  }
  return out;
}

TEST(KernelHarness, EveryCpuKernelMatchesItsReference) {
  const std::vector<std::string> only = KernelsFromEnv();
  auto report = CheckKernels(Backend::kCpu, only);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->ok()) << Describe(*report);
  if (std::getenv("KILN_HARNESS_VERBOSE") != nullptr)
    for (const auto& r : report->results)
      std::printf("%s %-36s %-44s max|err| %.2e %s\n", r.ok ? "PASS" : "FAIL", r.kernel.c_str(),
                  r.case_name.c_str(), r.max_err, r.detail.c_str());
  if (only.empty()) {
    EXPECT_EQ(report->kernels, RegisteredKernels(Backend::kCpu).size());
  }
  std::printf("%zu kernels, %zu kernel-case runs\n", report->kernels, report->results.size());
  EXPECT_GE(report->results.size(), report->kernels);
}

// Every case of every op runs on the op's reference kernel: cases of ops whose only fast kernels
// are on a device (Gather, Pad, the reductions on CUDA) are checked here too.
TEST(KernelHarness, EveryCaseRunsOnItsReference) {
  size_t cases = 0;
  for (const ir::OpDef* def : ir::OpRegistry::Global().All()) {
    for (const ops::OpCase& c : ops::CasesFor(def->domain, def->op_type)) {
      if (c.opset < def->since || c.opset > def->until) continue;
      ++cases;
      SCOPED_TRACE(def->op_type + ": " + c.name);
      Status s = RunCaseOnReference(def->domain, def->op_type, c);
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
  }
  EXPECT_GT(cases, 0u);
}

// ---- A host-memory device for the proof backend ----

// It keeps DeviceRun's order as the CUDA run does (Begin, uploads, StartCompute, kernels,
// downloads, Finish): the harness skipping StartCompute failed every case on the first H200 run.
class HostRun final : public runtime::DeviceRun {
 public:
  explicit HostRun(size_t arena) : arena_(*runtime::AlignedHostMemory(arena)) {}
  Status Begin() override {
    started_ = false;
    return OkStatus();
  }
  void* arena() override { return arena_.get(); }
  void* stream() override { return this; }
  Status Upload(const void* src, void* dst, size_t n) override {
    std::memcpy(dst, src, n);
    return OkStatus();
  }
  Status StartCompute() override {
    started_ = true;
    return OkStatus();
  }
  Status Download(const void* src, void* dst, size_t n) override {
    if (!started_) return Internal("Download before StartCompute");
    std::memcpy(dst, src, n);
    return OkStatus();
  }
  Status Finish() override {
    return started_ ? OkStatus() : Internal("Finish before StartCompute");
  }
  runtime::DeviceTimings LastTimings() const override { return {}; }

 private:
  std::shared_ptr<void> arena_;
  bool started_ = false;
};

class HostDevice final : public runtime::Device {
 public:
  std::string Describe() const override { return "host memory (test)"; }
  StatusOr<std::shared_ptr<void>> Allocate(size_t bytes) override {
    return runtime::AlignedHostMemory(bytes);
  }
  Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return OkStatus();
  }
  StatusOr<std::unique_ptr<runtime::DeviceRun>> NewRun(size_t arena, size_t, size_t,
                                                       bool) override {
    return std::unique_ptr<runtime::DeviceRun>(new HostRun(arena));
  }
};

StatusOr<std::shared_ptr<runtime::Device>> MakeHostDevice(int) {
  return std::shared_ptr<runtime::Device>(new HostDevice());
}
// The proof backend (core/test_backend.h): a Backend value of its own, named "proof".
const Backend kProof = TestBackend("proof");
runtime::DeviceRegistrar proof_device(kProof, &MakeHostDevice);

// ---- Proof kernels: Relu, each with one defect ----

enum class Defect { kNone, kWrongValue, kSkipLast, kPastEnd, kChangesInput };

class ProofRelu final : public runtime::Kernel {
 public:
  explicit ProofRelu(Defect d) : d_(d) {}
  Status Run(const ir::ComputeContext& ctx) const override {
    const int64_t n = ctx.in(0).numel();
    const float* x = ctx.in(0).data<float>();
    float* y = ctx.out(0).data<float>();
    const int64_t stop = d_ == Defect::kSkipLast ? n - 1 : n;
    for (int64_t i = 0; i < stop; ++i) y[i] = x[i] > 0 ? x[i] : 0;
    if (d_ == Defect::kWrongValue) y[n / 2] += 0.01f;
    if (d_ == Defect::kPastEnd) y[n] = 0;
    if (d_ == Defect::kChangesInput) const_cast<float*>(x)[0] = 7;
    return OkStatus();
  }

 private:
  Defect d_;
};

runtime::KernelDef ProofDef(const std::string& name, Defect d, const std::string& op = "Relu") {
  runtime::KernelDef def;
  def.name = name;
  def.op_type = op;
  def.backend = kProof;
  def.create = [d](const ir::Node&, const ir::Op&) { return std::make_unique<ProofRelu>(d); };
  return def;
}

KILN_REGISTER_KERNEL(ProofDef("proof.relu.good", Defect::kNone));
KILN_REGISTER_KERNEL(ProofDef("proof.relu.wrong_value", Defect::kWrongValue));
KILN_REGISTER_KERNEL(ProofDef("proof.relu.skips_last", Defect::kSkipLast));
KILN_REGISTER_KERNEL(ProofDef("proof.relu.past_end", Defect::kPastEnd));
KILN_REGISTER_KERNEL(ProofDef("proof.relu.changes_input", Defect::kChangesInput));
KILN_REGISTER_KERNEL([] {
  runtime::KernelDef def = ProofDef("proof.relu.declines_all", Defect::kNone);
  def.supports = [](const ir::Node&, const ir::Op&, const std::vector<runtime::TensorInfo>&) {
    return runtime::KernelSupport{false, "declines everything"};
  };
  return def;
}());
// An op that registers no cases (Size has no fast kernel anywhere, so no cases).
KILN_REGISTER_KERNEL(ProofDef("proof.size.no_cases", Defect::kNone, "Size"));

KernelCheckReport CheckOne(const std::string& kernel) {
  auto r = CheckKernels(kProof, {kernel});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : KernelCheckReport{};
}

TEST(KernelHarness, CorrectKernelPassesOnTheDevicePath) {
  KernelCheckReport r = CheckOne("proof.relu.good");
  EXPECT_TRUE(r.ok()) << Describe(r);
  EXPECT_EQ(r.kernels, 1u);
  EXPECT_EQ(r.results.size(), 3u);  // Relu's three cases
}

bool SomeFailureSays(const KernelCheckReport& r, const std::string& words) {
  for (const auto& x : r.results)
    if (!x.ok && x.detail.find(words) != std::string::npos) return true;
  return false;
}

TEST(KernelHarness, WrongValueFails) {
  KernelCheckReport r = CheckOne("proof.relu.wrong_value");
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(SomeFailureSays(r, "vs reference")) << Describe(r);
}

TEST(KernelHarness, UnwrittenElementFails) {
  KernelCheckReport r = CheckOne("proof.relu.skips_last");
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(SomeFailureSays(r, "never written")) << Describe(r);
}

TEST(KernelHarness, WritePastTheEndFails) {
  KernelCheckReport r = CheckOne("proof.relu.past_end");
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(SomeFailureSays(r, "wrote past the end of output 0")) << Describe(r);
}

TEST(KernelHarness, ChangedInputFails) {
  KernelCheckReport r = CheckOne("proof.relu.changes_input");
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(SomeFailureSays(r, "changed input 0")) << Describe(r);
}

TEST(KernelHarness, KernelWithoutCasesFails) {
  KernelCheckReport r = CheckOne("proof.size.no_cases");
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.without_cases.size(), 1u);
  EXPECT_NE(r.without_cases[0].find("proof.size.no_cases"), std::string::npos);
}

TEST(KernelHarness, KernelThatDeclinesEveryCaseFails) {
  KernelCheckReport r = CheckOne("proof.relu.declines_all");
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.never_ran.size(), 1u);
  EXPECT_NE(r.never_ran[0].find("declines everything"), std::string::npos);
}

// A backend whose device cannot be opened (none registered, no plugin): the error comes back and
// nothing is checked.
TEST(KernelHarness, BackendWithoutADeviceIsAnError) {
  auto r = CheckKernels(TestBackend("nodevice"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("libkiln_nodevice.so not found"), std::string::npos)
      << r.status().ToString();
}

}  // namespace
}  // namespace kiln
