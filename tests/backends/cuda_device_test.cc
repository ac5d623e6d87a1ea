// On a machine with an NVIDIA GPU (label "gpu": `ctest -L gpu`; the default test run excludes
// it): small models run on the CUDA backend in fp32, fp16 and CUDA-graph replay must match the
// CPU reference kernels. A test skips itself only where the machine has no NVIDIA driver or the
// driver finds no device (cuda::AbsentGpuReason); with a device, a plugin that does not load, a
// device that does not open or a wrong result fails.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/cuda/cuda_probe.h"
#include "kiln/session.h"
#include "onnx/model_builder.h"
#include "runtime/device.h"

namespace kiln {
namespace {

using onnxio::ModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;

// Why this machine has no GPU (no driver, or no device), or "" when the tests must run.
std::string NoGpu() { return cuda::AbsentGpuReason(cuda::ProbeDriver()); }
#define KILN_SKIP_WITHOUT_GPU()                        \
  if (const std::string why = NoGpu(); !why.empty()) { \
    GTEST_SKIP() << why;                               \
  }

// With a device present, the plugin must load and open it: any failure here is a failure.
TEST(CudaDeviceTest, DeviceOpens) {
  KILN_SKIP_WITHOUT_GPU();
  auto d = runtime::OpenDevice(Backend::kCuda, 0);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_NE(*d, nullptr);
}

// Conv + bias + relu + residual, global pool, flatten, gemm: the shape of a small CNN.
std::string SmallCnn() {
  ModelBuilder b(13);
  b.Input("x", kF32, {2, 8, 10, 10}).Output("y", kF32, {2, 5});
  std::vector<float> w(8 * 8 * 9), bias(8), fc(5 * 8), fb(5);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 37) % 17) / 17.f - 0.5f;
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.1f * static_cast<float>(i);
  for (size_t i = 0; i < fc.size(); ++i) fc[i] = static_cast<float>((i * 13) % 7) / 7.f - 0.4f;
  b.FloatInit("w", {8, 8, 3, 3}, w);
  b.FloatInit("b", {8}, bias);
  b.FloatInit("fc", {5, 8}, fc);
  b.FloatInit("fb", {5}, fb);
  ModelBuilder::IntsAttr(b.Node("Conv", {"x", "w", "b"}, {"c"}), "pads", {1, 1, 1, 1});
  b.Node("Add", {"c", "x"}, {"s"});
  b.Node("Relu", {"s"}, {"r"});
  b.Node("GlobalAveragePool", {"r"}, {"g"});
  b.Node("Flatten", {"g"}, {"f"});
  ModelBuilder::IntAttr(b.Node("Gemm", {"f", "fc", "fb"}, {"y"}), "transB", 1);
  return b.Bytes();
}

void Compare(const SessionOptions& opts, double tol, int runs) {
  SessionOptions ref;
  ref.reference_only = true;
  auto r = Session::LoadFromBytes(SmallCnn(), ref);
  auto d = Session::LoadFromBytes(SmallCnn(), opts);
  ASSERT_TRUE(r.ok() && d.ok()) << d.status().ToString();
  Tensor x = Tensor::Empty(DataType::kFloat, {2, 8, 10, 10});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::sin(0.1f * i);
  std::vector<NamedTensor> want, got;
  ASSERT_TRUE((*r)->Run({{"x", x}}, &want).ok());
  for (int i = 0; i < runs; ++i) {
    Status s = (*d)->Run({{"x", x}}, &got);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  ASSERT_EQ(want.size(), 1u);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].tensor.dtype(), DataType::kFloat);
  ASSERT_EQ(got[0].tensor.shape(), want[0].tensor.shape());
  ASSERT_EQ(got[0].tensor.shape(), Shape({2, 5}));
  for (int64_t i = 0; i < want[0].tensor.numel(); ++i) {
    const double w = want[0].tensor.data<float>()[i], g = got[0].tensor.data<float>()[i];
    EXPECT_LE(std::fabs(g - w), tol + tol * std::fabs(w)) << i;
  }
}

TEST(CudaDeviceTest, Fp32MatchesReference) {
  KILN_SKIP_WITHOUT_GPU();
  SessionOptions o;
  o.backend = Backend::kCuda;
  Compare(o, 1e-4, 1);
}

TEST(CudaDeviceTest, Fp16MatchesReferenceLoosely) {
  KILN_SKIP_WITHOUT_GPU();
  SessionOptions o;
  o.backend = Backend::kCuda;
  o.precision = Precision::kFp16;
  Compare(o, 1e-2, 1);
  // Activations stay float16 between the kernels: x is cast once, the convolution, pool and
  // product read and write float16, and only y is cast back.
  auto d = Session::LoadFromBytes(SmallCnn(), o);
  ASSERT_TRUE(d.ok());
  auto plan = (*d)->DescribePlan({{"x", Tensor::Empty(DataType::kFloat, {2, 8, 10, 10})}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_NE(plan->find("cuda.globalaveragepool.kernel float16[2,8,1,1]"), std::string::npos)
      << *plan;
  size_t casts = 0;
  for (size_t at = plan->find("cuda.cast.kernel"); at != std::string::npos;
       at = plan->find("cuda.cast.kernel", at + 1))
    ++casts;
  EXPECT_EQ(casts, 2u) << *plan;
}

TEST(CudaDeviceTest, GraphReplayMatchesReference) {
  KILN_SKIP_WITHOUT_GPU();
  SessionOptions o;
  o.backend = Backend::kCuda;
  o.cuda_graph = true;
  Compare(o, 1e-4, 4);  // runs 3 and 4 replay the graph captured in run 2
}

TEST(CudaDeviceTest, PageableStagingMatchesReference) {
  KILN_SKIP_WITHOUT_GPU();
  SessionOptions o;
  o.backend = Backend::kCuda;
  o.pinned_staging = false;
  Compare(o, 1e-4, 2);
}

}  // namespace
}  // namespace kiln
