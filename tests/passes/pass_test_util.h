// Helpers for the graph-optimizer tests: build a model with ModelBuilder, run it with the
// optimizer off and on and compare outputs, and count the op types the optimizer leaves.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../runtime/model_builder.h"
#include "kiln/session.h"
#include "onnx/onnx_loader.h"
#include "passes/pass_manager.h"

namespace kiln::testing {

constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kI64 = onnx::TensorProto::INT64;

// Attribute setters shared with ModelBuilder (src/onnx/model_builder.h).
inline constexpr auto& FloatAttr = ModelBuilder::FloatAttr;
inline constexpr auto& StringAttr = ModelBuilder::StringAttr;

// Constant node producing a float tensor.
inline void ConstantNode(ModelBuilder& m, const std::string& out, const std::vector<int64_t>& dims,
                         const std::vector<float>& values) {
  auto& n = m.Node("Constant", {}, {out});
  auto* a = n.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  auto* t = a->mutable_t();
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (auto d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
}

inline std::vector<float> RandomValues(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

inline int64_t Count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

// A float initializer of random values.
inline void RandomInit(ModelBuilder& m, const std::string& name, const std::vector<int64_t>& dims,
                       uint32_t seed, float lo = -1.f, float hi = 1.f) {
  m.FloatInit(name, dims, RandomValues(static_cast<size_t>(Count(dims)), seed, lo, hi));
}

inline Tensor RandomTensor(const Shape& shape, uint32_t seed, float lo = -2.f, float hi = 2.f) {
  Tensor t = Tensor::Empty(DataType::kFloat, shape);
  auto v = RandomValues(static_cast<size_t>(t.numel()), seed, lo, hi);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

// The graph after the default passes (minus `disabled`), as an op-type histogram ("Conv",
// "kiln.FusedConv"); `log` receives the pass log.
inline std::map<std::string, int> OptimizedOps(const std::string& bytes,
                                               const std::vector<std::string>& disabled = {},
                                               std::vector<std::string>* log = nullptr) {
  std::map<std::string, int> hist;
  auto g = onnxio::LoadModelFromBytes(bytes, "");
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return hist;
  SessionOptions o;
  o.disabled_passes = disabled;
  Status s = passes::RunDefaultPasses(**g, o, log);
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (const auto& n : (*g)->nodes) hist[(n.domain.empty() ? "" : n.domain + ".") + n.op_type]++;
  return hist;
}

// Number of nodes of `op` (0 when absent).
inline int Ops(const std::map<std::string, int>& h, const std::string& op) {
  auto it = h.find(op);
  return it == h.end() ? 0 : it->second;
}

inline std::vector<NamedTensor> RunModel(const std::string& bytes,
                                         const std::vector<NamedTensor>& inputs,
                                         const SessionOptions& o) {
  std::vector<NamedTensor> out;
  auto s = Session::LoadFromBytes(bytes, o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return out;
  Status r = (*s)->Run(inputs, &out);
  EXPECT_TRUE(r.ok()) << r.ToString();
  return out;
}

// Expects `got` to match `want` elementwise within rtol (plus atol, for values near zero).
inline void ExpectClose(const std::vector<NamedTensor>& want, const std::vector<NamedTensor>& got,
                        float rtol, float atol, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(want[i].name, got[i].name) << what;
    const Tensor& a = want[i].tensor;
    const Tensor& b = got[i].tensor;
    ASSERT_EQ(a.dtype(), b.dtype()) << what;
    ASSERT_EQ(a.shape(), b.shape()) << what;
    ASSERT_EQ(a.dtype(), DataType::kFloat) << what;
    int bad = 0;
    for (int64_t k = 0; k < a.numel() && bad < 5; ++k) {
      const float x = a.data<float>()[k], y = b.data<float>()[k];
      if (!(std::fabs(x - y) <= rtol * std::fabs(x) + atol)) {
        ++bad;
        ADD_FAILURE() << what << ": " << want[i].name << "[" << k << "]: unoptimized " << x
                      << ", optimized " << y;
      }
    }
  }
}

// Runs the model with the optimizer off and with it on (minus `disabled`) and expects the same
// outputs: with reference kernels only, within 1e-5 relative (plus 1e-6 absolute), which checks
// the rewrite itself; with the backend's fast kernels (which may take the fused nodes), within
// 1e-4 relative (plus 1e-5 absolute), which checks they implement the fused ops' semantics.
inline void ExpectSameOutputs(const std::string& bytes, const std::vector<NamedTensor>& inputs,
                              const std::vector<std::string>& disabled = {}) {
  for (bool reference : {true, false}) {
    SessionOptions off;
    off.optimize = false;
    off.reference_only = true;
    SessionOptions on;
    on.disabled_passes = disabled;
    on.reference_only = reference;
    auto want = RunModel(bytes, inputs, off);
    auto got = RunModel(bytes, inputs, on);
    if (reference)
      ExpectClose(want, got, 1e-5f, 1e-6f, "reference kernels");
    else
      ExpectClose(want, got, 1e-4f, 1e-5f, "fast kernels");
  }
}

}  // namespace kiln::testing
