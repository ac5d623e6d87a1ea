// Session precision in kernel selection (KernelDef::precisions): a kernel whose list lacks the
// session's precision is passed over, with the reason in SelectKernel's `declined` text and in
// KILN_VERBOSE=dispatch's log; a kernel with an empty list is chosen under any precision. First
// on kernels of a test backend (core/test_backend.h), selected by SelectKernel alone (no device,
// no Prepare), then on the CPU's own declarations: Winograd computes in float32 only, so under
// bf16 the selector passes it over for oneDNN's convolution, as its Prepare used to refuse it.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/test_backend.h"
#include "ir/op.h"
#include "runtime/kernel.h"

namespace kiln {
namespace {

using runtime::KernelDef;

const Backend kPrecisionTest = TestBackend("precisiontest");

class NeverRuns final : public runtime::Kernel {
 public:
  Status Run(const ir::ComputeContext&) const override { return Internal("never runs"); }
};
std::unique_ptr<runtime::Kernel> MakeNeverRuns(const ir::Node&, const ir::Op&) {
  return std::make_unique<NeverRuns>();
}

// Relu: a float32-only kernel above one that computes the same under any precision. Sigmoid: one
// kernel for fp32 and fp16 only.
KILN_REGISTER_KERNEL(KernelDef{"precisiontest.relu.fp32",
                               "Relu",
                               "",
                               1,
                               ir::kMaxOpset,
                               kPrecisionTest,
                               20,
                               nullptr,
                               MakeNeverRuns,
                               {},
                               {},
                               {Precision::kFp32}});
KILN_REGISTER_KERNEL(KernelDef{"precisiontest.relu.any",
                               "Relu",
                               "",
                               1,
                               ir::kMaxOpset,
                               kPrecisionTest,
                               10,
                               nullptr,
                               MakeNeverRuns,
                               {}});
KILN_REGISTER_KERNEL(KernelDef{"precisiontest.sigmoid.fp32_fp16",
                               "Sigmoid",
                               "",
                               1,
                               ir::kMaxOpset,
                               kPrecisionTest,
                               10,
                               nullptr,
                               MakeNeverRuns,
                               {},
                               {},
                               {Precision::kFp32, Precision::kFp16}});

struct Choice {
  std::string name, declined;
};

// The kernel SelectKernel chooses for a one-input `op_type` node on float32 [2, 3].
Choice SelectUnary(const std::string& op_type, Backend backend, Precision precision) {
  ir::Node node;
  node.name = "n";
  node.op_type = op_type;
  node.opset = 13;
  node.inputs = {0};
  node.outputs = {1};
  const ir::OpDef* def = ir::OpRegistry::Global().Find("", op_type, 13);
  if (def == nullptr) return {"no op " + op_type, ""};
  auto op = def->create(node);
  if (!op.ok()) return {op.status().ToString(), ""};
  runtime::SelectedKernel sel = runtime::SelectKernel(
      node, **op, {{DataType::kFloat, {2, 3}, nullptr}}, {nullptr}, backend, precision, false);
  return {sel.name, sel.reference ? sel.declined : ""};
}

TEST(KernelPrecisionTest, KernelWithoutTheSessionsPrecisionIsPassedOver) {
  EXPECT_EQ(SelectUnary("Relu", kPrecisionTest, Precision::kFp32).name, "precisiontest.relu.fp32");
  // Under bf16 and fp16 the float32-only kernel is passed over; the empty list takes any.
  EXPECT_EQ(SelectUnary("Relu", kPrecisionTest, Precision::kBf16).name, "precisiontest.relu.any");
  EXPECT_EQ(SelectUnary("Relu", kPrecisionTest, Precision::kFp16).name, "precisiontest.relu.any");

  EXPECT_EQ(SelectUnary("Sigmoid", kPrecisionTest, Precision::kFp16).name,
            "precisiontest.sigmoid.fp32_fp16");
  const Choice bf16 = SelectUnary("Sigmoid", kPrecisionTest, Precision::kBf16);
  EXPECT_EQ(bf16.name, "precisiontest.sigmoid.ref");
  EXPECT_EQ(bf16.declined,
            "precisiontest.sigmoid.fp32_fp16: computes in fp32 or fp16; the session asks bf16");

  // With the any-precision kernel disabled, both Relu kernels decline, each with its reason.
  ASSERT_EQ(setenv("KILN_DISABLE_KERNELS", "precisiontest.relu.any", 1), 0);
  const Choice relu = SelectUnary("Relu", kPrecisionTest, Precision::kBf16);
  unsetenv("KILN_DISABLE_KERNELS");
  EXPECT_EQ(relu.name, "precisiontest.relu.ref");
  EXPECT_EQ(relu.declined,
            "precisiontest.relu.fp32: computes in fp32; the session asks bf16; "
            "precisiontest.relu.any: disabled by KILN_DISABLE_KERNELS");
}

// KILN_VERBOSE=dispatch (read once per process) prints the same reason: checked in a child
// process started afresh, so that nothing in it selected a kernel before the variable was set.
TEST(KernelPrecisionTest, DispatchLogSaysWhyAKernelWasPassedOver) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ASSERT_EQ(setenv("KILN_VERBOSE", "dispatch", 1), 0);
  EXPECT_EXIT(
      {
        const Choice c = SelectUnary("Sigmoid", kPrecisionTest, Precision::kBf16);
        std::fprintf(stderr, "chose %s\n", c.name.c_str());
        std::exit(0);
      },
      ::testing::ExitedWithCode(0),
      "precisiontest.sigmoid.fp32_fp16 declined: computes in fp32 or fp16; the session asks "
      "bf16(.|\n)*chose precisiontest.sigmoid.ref");
  unsetenv("KILN_VERBOSE");
}

// The CPU's declarations, as the kernels compute: oneDNN's float convolutions and products take
// bf16 (ComputeType), Winograd float32 only; everything else computes the same under any.
TEST(KernelPrecisionTest, CpuKernelsDeclareWhatTheyCompute) {
  std::map<std::string, std::vector<Precision>> declared;
  for (const KernelDef* d : runtime::KernelRegistry::Global().All(Backend::kCpu))
    declared[d->name] = d->precisions;
  const std::vector<Precision> fp32 = {Precision::kFp32};
  const std::vector<Precision> fp32_bf16 = {Precision::kFp32, Precision::kBf16};
  for (const char* k : {"cpu.conv.winograd", "cpu.fusedconv.winograd"})
    EXPECT_EQ(declared.at(k), fp32) << k;
  for (const char* k : {"cpu.conv.onednn", "cpu.fusedconv.onednn", "cpu.convtranspose.onednn",
                        "cpu.gemm.onednn", "cpu.matmul.onednn", "cpu.fusedmatmul.onednn"})
    EXPECT_EQ(declared.at(k), fp32_bf16) << k;
  size_t any = 0;
  for (const auto& [name, precisions] : declared) any += precisions.empty();
  EXPECT_EQ(any, declared.size() - 8);  // e.g. cpu.relu.small, cpu.matmul.batched, int8 kernels
  EXPECT_TRUE(declared.at("cpu.matmul.batched").empty());
  EXPECT_TRUE(declared.at("cpu.deformconv.onednn").empty());
}

// A 3x3 convolution on the CPU: under bf16 Winograd is passed over with its reason before its
// Supports() is asked, and oneDNN's convolution is chosen, as when Winograd's Prepare refused
// bf16; under fp32 the precision is no reason to pass it over.
TEST(KernelPrecisionTest, WinogradIsPassedOverUnderBf16) {
  ir::Node node;
  node.name = "conv";
  node.op_type = "Conv";
  node.opset = 13;
  node.inputs = {0, 1, 2};
  node.outputs = {3};
  auto op = ir::OpRegistry::Global().Find("", "Conv", 13)->create(node);
  ASSERT_TRUE(op.ok()) << op.status().ToString();
  const Tensor w = Tensor::Empty(DataType::kFloat, {16, 16, 3, 3});
  const Tensor b = Tensor::Empty(DataType::kFloat, {16});
  const std::vector<runtime::TensorInfo> in = {{DataType::kFloat, {1, 16, 32, 32}, nullptr},
                                               {DataType::kFloat, w.shape(), nullptr},
                                               {DataType::kFloat, b.shape(), nullptr}};
  const std::vector<const Tensor*> constants = {nullptr, &w, &b};
  auto select = [&](Precision p) {
    return runtime::SelectKernel(node, **op, in, constants, Backend::kCpu, p, false);
  };
  EXPECT_EQ(select(Precision::kBf16).name, "cpu.conv.onednn");
  ASSERT_EQ(setenv("KILN_DISABLE_KERNELS", "cpu.conv.onednn", 1), 0);
  const runtime::SelectedKernel bf16 = select(Precision::kBf16);
  const runtime::SelectedKernel fp32 = select(Precision::kFp32);
  unsetenv("KILN_DISABLE_KERNELS");
  EXPECT_EQ(bf16.name, "cpu.conv.ref");
  EXPECT_NE(bf16.declined.find("cpu.conv.winograd: computes in fp32; the session asks bf16"),
            std::string::npos)
      << bf16.declined;
  // Under fp32 Winograd runs or declines for this CPU's or the shape's reasons, never for the
  // precision.
  EXPECT_EQ(fp32.declined.find("computes in"), std::string::npos) << fp32.declined;
}

}  // namespace
}  // namespace kiln
