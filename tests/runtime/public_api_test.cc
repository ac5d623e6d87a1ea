// The public API the kiln program is built on (it includes only include/kiln/): InspectModel,
// Session::DescribePlanSummary and optimized_op_counts, tensor files, and diagnostics.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/diagnostics.h"
#include "kiln/inspect.h"
#include "kiln/session.h"
#include "kiln/tensor_io.h"
#include "model_builder.h"

namespace kiln {
namespace {

using testing::ModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;
namespace fs = std::filesystem;

std::string TempFile(const std::string& name, const std::string& bytes) {
  const fs::path p =
      fs::temp_directory_path() / ("kiln_public_api_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p, std::ios::binary) << bytes;
  return p.string();
}

// Conv -> Relu (fused by the optimizer), and an op kiln does not have.
std::string ConvReluModel(bool unsupported) {
  ModelBuilder m;
  m.Input("x", kF32, {-1, 2, 6, 6}).Output("y", kF32, {-1, 4, 6, 6});
  std::vector<float> w(4 * 2 * 3 * 3, 0.1f);
  m.FloatInit("w", {4, 2, 3, 3}, w);
  auto& c = m.Node("Conv", {"x", "w"}, {"c"});
  ModelBuilder::IntsAttr(c, "pads", {1, 1, 1, 1});
  if (unsupported) {
    m.Node("NoSuchOp", {"c"}, {"y"});
  } else {
    m.Node("Relu", {"c"}, {"y"});
  }
  return m.Bytes();
}

TEST(PublicApiTest, InspectModelReportsWithoutPreparing) {
  const std::string path = TempFile("ok.onnx", ConvReluModel(false));
  auto r = InspectModel(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->nodes, 2);
  EXPECT_EQ(r->parameters, 72);
  EXPECT_EQ(r->parameter_bytes, 288);
  EXPECT_EQ(r->op_counts, (std::vector<std::pair<std::string, int>>{{"Conv", 1}, {"Relu", 1}}));
  EXPECT_EQ(r->inputs[0].ToString(), "float32[N,2,6,6]");
  EXPECT_TRUE(r->unsupported.empty());

  const std::string bad = TempFile("bad.onnx", ConvReluModel(true));
  auto rb = InspectModel(bad);
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  EXPECT_NE(rb->unsupported.find("NoSuchOp"), std::string::npos) << rb->unsupported;
  EXPECT_EQ(InspectModel(path + ".missing").status().code(), StatusCode::kNotFound);
  fs::remove(path);
  fs::remove(bad);
}

TEST(PublicApiTest, PlanSummaryIsNumbers) {
  auto s = Session::LoadFromBytes(ConvReluModel(false));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->optimized_op_counts(),
            (std::vector<std::pair<std::string, int>>{{"kiln.FusedConv", 1}}));
  auto p = (*s)->DescribePlanSummary({{"x", Tensor::Empty(DataType::kFloat, {2, 2, 6, 6})}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_GT(p->arena_bytes, 0u);
  ASSERT_FALSE(p->steps.empty());
  const auto conv = std::find_if(p->steps.begin(), p->steps.end(),
                                 [](const PlanStep& st) { return st.op_type == "kiln.FusedConv"; });
  ASSERT_NE(conv, p->steps.end());
  EXPECT_EQ(conv->kernel, "cpu.fusedconv.onednn");
  EXPECT_NE(p->text.find("memory plan: one arena of " + std::to_string(p->arena_bytes)),
            std::string::npos)
      << p->text;
}

TEST(PublicApiTest, TensorFiles) {
  const Tensor t = Tensor::FromVector<float>({1.f, -2.5f, 65504.f, 1e-8f}, {2, 2});
  const std::string path = TempFile("t.npy", "");
  ASSERT_TRUE(WriteNpyFile(t, path).ok());
  auto back = ReadTensorFile(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->shape(), (Shape{2, 2}));
  EXPECT_EQ(back->data<float>()[1], -2.5f);
  EXPECT_EQ(ReadTensorFile(path + ".txt").status().code(), StatusCode::kInvalidArgument);
  fs::remove(path);

  auto h = ConvertFloatTensor(t, DataType::kFloat16);
  ASSERT_TRUE(h.ok());
  const auto* hp = static_cast<const uint16_t*>(h->raw());
  EXPECT_EQ(hp[0], 0x3C00);  // 1.0
  EXPECT_EQ(hp[1], 0xC100);  // -2.5
  EXPECT_EQ(hp[2], 0x7BFF);  // 65504, the largest half
  EXPECT_EQ(hp[3], 0x0000);  // 1e-8 underflows to +0
  auto b = ConvertFloatTensor(t, DataType::kBFloat16);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(static_cast<const uint16_t*>(b->raw())[0], 0x3F80);
  EXPECT_EQ(ConvertFloatTensor(t, DataType::kInt32).status().code(), StatusCode::kUnsupported);

  EXPECT_EQ(TensorFileName("a/b:c"), "a_b_c");
  EXPECT_EQ(TensorFileName(".."), "_..");
  EXPECT_EQ(TensorFileName(""), "_");
}

TEST(PublicApiTest, Diagnostics) {
  const CpuDescription& cpu = DescribeCpu();
  EXPECT_GE(cpu.physical_cores, 1);
  EXPECT_FALSE(cpu.onednn_version.empty());
  EXPECT_FALSE(cpu.onednn_isa.empty());

  const auto doctor = nlohmann::json::parse(DoctorReportJson());
  EXPECT_EQ(doctor["cpu"]["physical_cores"].get<int>(), cpu.physical_cores);
  EXPECT_EQ(doctor["build"]["onednn_version"].get<std::string>(), cpu.onednn_version);
  EXPECT_TRUE(doctor.contains("cuda"));

  const std::vector<KernelInfo> kernels = RegisteredKernels(Backend::kCpu);
  EXPECT_TRUE(std::any_of(kernels.begin(), kernels.end(),
                          [](const KernelInfo& k) { return k.name == "cpu.conv.onednn"; }));
  const std::vector<OpInfo> ops = RegisteredOps();
  const auto conv = std::find_if(ops.begin(), ops.end(), [](const OpInfo& o) {
    return o.domain.empty() && o.op_type == "Conv";
  });
  ASSERT_NE(conv, ops.end());
  EXPECT_EQ(conv->cpu_kernels.front(), "cpu.conv.ref");
  EXPECT_NE(std::find(conv->cpu_kernels.begin(), conv->cpu_kernels.end(), "cpu.conv.onednn"),
            conv->cpu_kernels.end());
  EXPECT_TRUE(LoadBackend(Backend::kCpu).ok());
  EXPECT_EQ(*OpenDeviceDescription(Backend::kCpu), "cpu");
  // Backends are named by the user as strings, parsed once (the CLI's --device, Python's device=).
  EXPECT_EQ(*ParseBackend("cpu"), Backend::kCpu);
  EXPECT_EQ(*ParseBackend("cuda"), Backend::kCuda);
  EXPECT_STREQ(BackendName(Backend::kCuda), "cuda");
  EXPECT_EQ(ParseBackend("tpu").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseBackend("CPU").status().code(), StatusCode::kInvalidArgument);

  // The kernel harness through the public API: one kernel.
  auto report = CheckKernels(Backend::kCpu, {"cpu.relu.small"});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->kernels, 1u);
  EXPECT_FALSE(report->results.empty());
  EXPECT_TRUE(report->ok());
}

TEST(PublicApiTest, TensorSpecWithoutNamesPrints) {
  // A spec a caller builds may leave dim_names empty (ImageBatchDecoder::Create's error path
  // printed one and read past the vector before).
  TensorSpec spec;
  spec.dtype = DataType::kFloat;
  spec.dims = {-1, 3, 224, -1};
  spec.rank_known = true;
  EXPECT_EQ(spec.ToString(), "float32[?,3,224,?]");
  spec.dim_names = {"N"};
  EXPECT_EQ(spec.ToString(), "float32[N,3,224,?]");
}

}  // namespace
}  // namespace kiln
