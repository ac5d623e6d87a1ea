// Helpers of the CUDA kernel math tests (cuda_*_math_test.cc): random data, running a small ONNX
// graph on kiln's reference kernels (the oracle), replaying the device block reduction on the
// host, and the tolerance check |got - want| <= atol + rtol * |want|.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "../runtime/model_builder.h"
#include "backends/cuda/kernels/reduce_math.h"
#include "kiln/session.h"

namespace kiln::cuda_test {

using testing::ModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;

inline std::vector<float> Random(int64_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

// Attribute setters shared with ModelBuilder (src/onnx/model_builder.h).
inline constexpr auto& FloatAttr = ModelBuilder::FloatAttr;
inline constexpr auto& StringAttr = ModelBuilder::StringAttr;

// A graph output whose shape is left to kiln's shape inference.
inline void OutputAnyShape(ModelBuilder& mb, const std::string& name) {
  mb.OutputAnyShape(name, kF32);
}

// Runs the model on kiln's reference kernels (no graph passes); the outputs in graph order.
inline std::vector<Tensor> RunReference(const ModelBuilder& mb,
                                        const std::vector<NamedTensor>& inputs) {
  SessionOptions opts;
  opts.reference_only = true;
  opts.optimize = false;
  auto session = Session::LoadFromBytes(mb.Bytes(), opts);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  if (!session.ok()) return {};
  std::vector<NamedTensor> outputs;
  Status s = (*session)->Run(inputs, &outputs);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::vector<Tensor> result;
  for (auto& o : outputs) result.push_back(std::move(o.tensor));
  return result;
}

inline NamedTensor Input(const std::string& name, const std::vector<float>& v, const Shape& s) {
  return {name, Tensor::FromVector<float>(v, s)};
}

// Expects got[i] within atol + rtol * |want[i]| of want (equal infinities and NaN match); reports
// the first few mismatches.
inline void ExpectClose(const std::vector<float>& got, const Tensor& want, float atol = 1e-5f,
                        float rtol = 1e-5f) {
  ASSERT_EQ(static_cast<int64_t>(got.size()), want.numel());
  const float* w = want.data<float>();
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool same = got[i] == w[i] || (std::isnan(got[i]) && std::isnan(w[i]));  // inf, NaN
    if (!same && !(std::fabs(got[i] - w[i]) <= atol + rtol * std::fabs(w[i])) && bad++ < 3)
      ADD_FAILURE() << "[" << i << "]: got " << got[i] << ", want " << w[i];
  }
  EXPECT_EQ(bad, 0);
}

// The device BlockReduce (kernel_util.cuh) replayed on the host: each thread's ThreadPartial, then
// the same pairwise tree.
template <typename Load>
float BlockReduceOnHost(cuda_math::ReduceKind k, const Load& load, int64_t n) {
  constexpr int kT = cuda_math::kReduceThreads;
  float partial[kT];
  for (int t = 0; t < kT; ++t) partial[t] = cuda_math::ThreadPartial(k, load, n, t, kT);
  for (int s = kT / 2; s > 0; s >>= 1)
    for (int t = 0; t < s; ++t) partial[t] = cuda_math::Combine(k, partial[t], partial[t + s]);
  return partial[0];
}

}  // namespace kiln::cuda_test
