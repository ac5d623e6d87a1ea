// Shared by the oneDNN CPU kernel tests (tests/kernels/onednn_*_test.cc, one binary:
// kiln_onednn_kernels_test): seeded data, the bf16 skip rule, and CheckAgainstReference, which runs
// a small graph on the reference kernels and on the fast ones and compares the outputs.
// Tolerance: |fast - ref| <= 1e-4 + 1e-4 * |ref| (fp32 accumulation vs the reference's double).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "../runtime/model_builder.h"
#include "blocked_layout_expectations.h"
#include "kiln/session.h"

namespace kiln::onednn_test {

using testing::ModelBuilder;
inline constexpr int kF32 = onnx::TensorProto::FLOAT;

// A bf16 session refused because this CPU has neither AVX512-BF16 nor AMX: the one reason a bf16
// test may skip. Any other load failure fails the test.
inline bool NoBf16Here(const Status& s) {
  return s.code() == StatusCode::kUnsupported &&
         s.message().find("AVX512-BF16 or AMX") != std::string::npos;
}

inline std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline Tensor RandomTensor(const Shape& s, uint32_t seed) {
  return Tensor::FromVector<float>(Random(static_cast<size_t>(NumElements(s)), seed), s);
}

// Runs the model with reference kernels and with the default (fast) kernels; compares outputs
// and checks `expect_kernels` all appear in the fast plan.
// With `optimize`, the fast session also runs the graph passes (fusions), so the fused kernels
// are compared with the unfused reference graph.
inline void CheckAgainstReference(const std::string& bytes, const std::vector<NamedTensor>& inputs,
                                  const std::vector<std::string>& expect_kernels,
                                  bool optimize = false, bool tune = false) {
  SessionOptions ref_opts;
  ref_opts.reference_only = true;
  ref_opts.optimize = false;
  SessionOptions fast_opts;
  fast_opts.optimize = optimize;
  fast_opts.tune = tune;
  auto ref = Session::LoadFromBytes(bytes, ref_opts);
  auto fast = Session::LoadFromBytes(bytes, fast_opts);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  auto plan = (*fast)->DescribePlan(inputs);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const auto& k : expect_kernels) {  // "a|b": either kernel
    if (testing::KernelMayBeDeclinedForBlockedLayout(*plan, k)) continue;
    bool found = false;
    for (size_t at = 0; at <= k.size();) {
      const size_t bar = std::min(k.find('|', at), k.size());
      found = found || plan->find(k.substr(at, bar - at)) != std::string::npos;
      at = bar + 1;
    }
    EXPECT_TRUE(found) << "kernel " << k << " not selected:\n" << *plan;
  }
  std::vector<NamedTensor> want, got;
  ASSERT_TRUE((*ref)->Run(inputs, &want).ok());
  Status s = (*fast)->Run(inputs, &got);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(want.size(), got.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].tensor.shape(), want[o].tensor.shape());
    const float* w = want[o].tensor.data<float>();
    const float* g = got[o].tensor.data<float>();
    int64_t bad = 0;
    for (int64_t i = 0; i < want[o].tensor.numel(); ++i)
      if (!(std::fabs(g[i] - w[i]) <= 1e-4f + 1e-4f * std::fabs(w[i])) && bad++ < 3)
        ADD_FAILURE() << "output " << o << " [" << i << "]: " << g[i] << " vs " << w[i];
    EXPECT_EQ(bad, 0);
  }
}

}  // namespace kiln::onednn_test

// Skips a bf16 test when `status` (a bf16 load's) says this CPU lacks bf16; fails it otherwise.
#define KILN_SKIP_IF_NO_BF16(status)                                                              \
  do {                                                                                            \
    const Status& kiln_bf16_status = (status);                                                    \
    ASSERT_TRUE(::kiln::onednn_test::NoBf16Here(kiln_bf16_status))                                \
        << "a bf16 load failed for another reason than the CPU: " << kiln_bf16_status.ToString(); \
    GTEST_SKIP() << "no bf16 on this CPU: " << kiln_bf16_status.message();                        \
  } while (0)
