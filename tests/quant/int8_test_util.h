// Shared by the INT8 tests (tests/quant/int8_*_test.cc, one binary: kiln_int8_test): seeded
// data, the small test nets, the QuantizerTest fixture, int8 initializers and the
// reference-against-fast runs. In a named namespace, so every file's TEST_F(QuantizerTest, ...)
// uses the same fixture class.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>

#include "../runtime/model_builder.h"
#include "kiln/diagnostics.h"
#include "kiln/quantize.h"
#include "kiln/session.h"
#include "onnx/onnx_loader.h"
#include "onnx/opset_convert.h"
#include "quant/calibration.h"
#include "quant/qdq_graph.h"
#include "runtime/session_access.h"

namespace kiln::int8_test {

using testing::ModelBuilder;

inline constexpr int kF32 = onnx::TensorProto::FLOAT;

inline std::vector<float> Uniform(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// A session over the model `bytes` with `outputs` (computed tensors) added to its graph outputs.
inline StatusOr<std::unique_ptr<Session>> LoadWithOutputs(const std::string& bytes,
                                                          const std::vector<std::string>& outputs) {
  KILN_ASSIGN_OR_RETURN(auto g, onnxio::LoadModelFromBytes(bytes, ""));
  KILN_RETURN_IF_ERROR(quant::AddOutputs(g.get(), outputs));
  return SessionAccess::LoadFromGraph(*g, SessionOptions{});
}

// What the quantizer finds in the model `bytes` (its Constant nodes hoisted first, as it does).
inline StatusOr<quant::QdqModelInfo> InspectBytes(const std::string& bytes) {
  KILN_ASSIGN_OR_RETURN(auto g, onnxio::LoadModelFromBytes(bytes, ""));
  KILN_RETURN_IF_ERROR(quant::HoistConstants(g.get()));
  return quant::InspectForQdq(*g);
}

// Largest |want - got| and largest |want| over float32 tensors of equal size.
inline std::pair<double, double> MaxAbsError(const Tensor& want, const Tensor& got) {
  double err = 0, ref = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    err = std::max(err, double(std::fabs(want.data<float>()[i] - got.data<float>()[i])));
    ref = std::max(ref, double(std::fabs(want.data<float>()[i])));
  }
  return {err, ref};
}

// The classifier tail of the test nets: GlobalAveragePool(in) -> Flatten -> Gemm 'fc' (weight w3,
// transposed) -> y; the serialized model.
// `bias`: Gemm's C (required before opset 11), "" for none.
inline std::string PoolAndGemm(ModelBuilder& mb, const std::string& in,
                               const std::string& bias = "") {
  mb.Node("GlobalAveragePool", {in}, {"g"});
  mb.Node("Flatten", {"g"}, {"f"});
  std::vector<std::string> gemm_in = {"f", "w3"};
  if (!bias.empty()) gemm_in.push_back(bias);
  ModelBuilder::IntAttr(mb.Node("Gemm", gemm_in, {"y"}, "fc"), "transB", 1);
  return mb.Bytes();
}

// A Constant node holding a float tensor (how Paddle2ONNX writes weights).
inline void ConstantNode(ModelBuilder& mb, const std::string& name,
                         const std::vector<int64_t>& dims, const std::vector<float>& values) {
  auto* a = mb.Node("Constant", {}, {name}, name + "_constant").add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  onnx::TensorProto* t = a->mutable_t();
  t->set_data_type(kF32);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
}

// Conv(3x3, 4->8) -> Relu -> Conv(1x1, 8->8) -> Relu -> GlobalAveragePool -> Flatten -> Gemm,
// weights as initializers or (`constants`) Constant nodes.
inline std::string SmallCnn(int opset = 13, bool constants = false) {
  ModelBuilder mb(opset);
  mb.Input("x", kF32, {-1, 4, 10, 10}).Output("y", kF32, {-1, 5});
  auto weight = [&](const std::string& name, const std::vector<int64_t>& dims,
                    const std::vector<float>& v) {
    if (constants)
      ConstantNode(mb, name, dims, v);
    else
      mb.FloatInit(name, dims, v);
  };
  weight("w1", {8, 4, 3, 3}, Uniform(8 * 4 * 9, 2, -0.5f, 0.5f));
  weight("b1", {8}, Uniform(8, 3, -0.1f, 0.1f));
  weight("w2", {8, 8, 1, 1}, Uniform(64, 4, -0.5f, 0.5f));
  weight("w3", {5, 8}, Uniform(40, 5, -0.5f, 0.5f));
  ModelBuilder::IntsAttr(mb.Node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1"), "pads", {1, 1, 1, 1});
  mb.Node("Relu", {"c1"}, {"r1"});
  mb.Node("Conv", {"r1", "w2"}, {"c2"}, "conv2");
  mb.Node("Relu", {"c2"}, {"r2"});
  if (opset < 11) weight("b3", {5}, Uniform(5, 6, -0.1f, 0.1f));
  return PoolAndGemm(mb, "r2", opset < 11 ? "b3" : "");
}

class QuantizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("kiln_int8_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    model_ = (dir_ / "cnn.onnx").string();
    std::ofstream(model_, std::ios::binary) << SmallCnn();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Every pass of `q` over four seeded batches of 8 samples [8, 4, 10, 10], then Write.
  static StatusOr<QuantizeSummary> CalibrateAndWrite(Quantizer* q, const std::string& out) {
    for (int pass = 0; pass < q->passes(); ++pass) {
      KILN_RETURN_IF_ERROR(q->BeginPass(pass));
      for (uint32_t b = 0; b < 4; ++b)
        KILN_RETURN_IF_ERROR(q->Observe(
            {{"x", Tensor::FromVector<float>(Uniform(8 * 400, 10 + b), {8, 4, 10, 10})}}));
    }
    return q->Write(out);
  }

  StatusOr<QuantizeSummary> Quantize(const QuantizeOptions& o, const std::string& out) {
    KILN_ASSIGN_OR_RETURN(auto q, Quantizer::Create(model_, o));
    return CalibrateAndWrite(q.get(), out);
  }

  // Every node int8, minmax, shared scales on or off.
  StatusOr<QuantizeSummary> QuantizeAll(bool share, const std::string& out) {
    QuantizeOptions o;
    o.method = "minmax";
    o.quantize_all = true;
    o.share_concat_scales = share;
    return Quantize(o, out);
  }

  // Held-out data: the int8 model's outputs stay within a few quantization steps of float's
  // (checked); returns the largest absolute difference.
  double ErrorAgainstFloat(const std::string& int8_model) {
    auto fp = Session::Load(model_);
    auto q = Session::Load(int8_model);
    SessionOptions ref_opts;
    ref_opts.reference_only = true;
    auto exact = Session::Load(int8_model, ref_opts);
    EXPECT_TRUE(fp.ok() && q.ok() && exact.ok()) << q.status().ToString();
    if (!fp.ok() || !q.ok() || !exact.ok()) return -1;
    std::vector<NamedTensor> in = {{"x", Tensor::FromVector<float>(Uniform(16 * 400, 77),
                                                                   {16, 4, 10, 10})}},
                             a, b, c;
    EXPECT_TRUE((*fp)->Run(in, &a).ok());
    EXPECT_TRUE((*q)->Run(in, &b).ok());
    EXPECT_TRUE((*exact)->Run(in, &c).ok());
    if (a.empty() || b.empty() || c.empty()) return -1;
    const auto [err, ref] = MaxAbsError(a[0].tensor, b[0].tensor);
    const auto [qdq_err, unused] = MaxAbsError(a[0].tensor, c[0].tensor);
    // The QDQ graph's own arithmetic (reference kernels) against float: the quantization's
    // error (3.3 % of max |y| on this net and data, measured 2026-11-28). With VNNI the int8
    // kernels compute that arithmetic (the same 3.3 %: they differ from it only where they round
    // a tie apart); without VNNI their 7-bit weights add to it (the Gemm's too: 3.9 % in all on
    // AVX2, 2.6 % before the Gemm ran in int8).
    EXPECT_LT(qdq_err, 0.035 * ref)
        << "QDQ arithmetic: max abs error " << qdq_err << " against max |y| " << ref;
    const bool vnni = DescribeCpu().int8.find("no VNNI") == std::string::npos;
    EXPECT_LT(err, (vnni ? 0.035 : 0.05) * ref) << "max abs error " << err << " against max |y| "
                                                << ref << " (QDQ arithmetic " << qdq_err << ")";
    if (vnni) {
      const auto [apart, unused2] = MaxAbsError(b[0].tensor, c[0].tensor);
      EXPECT_LT(apart, 0.005 * ref) << "int8 kernels against the QDQ arithmetic";
    }
    return err;
  }

  // The model at `path` on the reference kernels without the optimizer (its QDQ arithmetic) and
  // on the default kernels.
  void LoadRefAndFast(const std::string& path, std::unique_ptr<Session>* ref,
                      std::unique_ptr<Session>* fast) {
    std::ifstream f(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    SessionOptions ro;
    ro.reference_only = true;
    ro.optimize = false;
    auto r = Session::LoadFromBytes(bytes, ro);
    auto q = Session::LoadFromBytes(bytes, SessionOptions{});
    ASSERT_TRUE(r.ok() && q.ok());
    *ref = std::move(*r);
    *fast = std::move(*q);
  }

  // The model at `path` run on `x` by the reference kernels without the optimizer (its QDQ
  // arithmetic: want) and by the default kernels (got), and the latter's plan.
  void RunModelRefAndFast(const std::string& path, const Tensor& x, Tensor* want, Tensor* got,
                          std::string* plan) {
    std::unique_ptr<Session> ref, fast;
    LoadRefAndFast(path, &ref, &fast);
    if (HasFatalFailure()) return;
    std::vector<NamedTensor> w, g;
    ASSERT_TRUE(ref->Run({{"x", x}}, &w).ok());
    ASSERT_TRUE(fast->Run({{"x", x}}, &g).ok());
    auto p = fast->DescribePlan({{"x", x}});
    ASSERT_TRUE(p.ok());
    *want = w[0].tensor;
    *got = g[0].tensor;
    *plan = *p;
  }

  std::filesystem::path dir_;
  std::string model_;
};

// An int8 initializer `name` of shape `dims` whose i-th value is value(i).
inline void Int8Init(ModelBuilder& mb, const std::string& name, const Shape& dims,
                     const std::function<int(int64_t)>& value) {
  auto* t = mb.proto().mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT8);
  for (int64_t d : dims) t->add_dims(d);
  std::string raw;
  for (int64_t i = 0; i < NumElements(dims); ++i) raw.push_back(static_cast<char>(value(i)));
  t->set_raw_data(raw);
}

// Scales 0.01 * (1 + i % 7) * base for i < n: a factor of 7 between channels.
inline std::vector<float> ChannelScales(int64_t n, float base) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = base * static_cast<float>(1 + i % 7);
  return v;
}

// A zero-point initializer of `count` values `value` (none: a scalar).
inline void ZeroPoints(ModelBuilder& mb, const std::string& name, bool is_signed, int64_t count,
                       int value = 0) {
  auto* z = mb.proto().mutable_graph()->add_initializer();
  z->set_name(name);
  z->set_data_type(is_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
  if (count > 0) z->add_dims(count);
  z->set_raw_data(
      std::string(static_cast<size_t>(std::max<int64_t>(count, 1)), static_cast<char>(value)));
}

// The model run by the reference kernels without the optimizer (the QDQ graph's own arithmetic)
// and by the optimizer and fast kernels, on x.
struct RefAndFast {
  std::string plan;  // the fast session's plan
  Tensor want, got;
};

inline void RunRefAndFast(const std::string& bytes, const Tensor& x, RefAndFast* r) {
  SessionOptions ref_opts;
  ref_opts.reference_only = true;
  ref_opts.optimize = false;
  auto ref = Session::LoadFromBytes(bytes, ref_opts);
  auto fast = Session::LoadFromBytes(bytes, SessionOptions{});
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  auto plan = (*fast)->DescribePlan({{"x", x}});
  ASSERT_TRUE(plan.ok());
  r->plan = *plan;
  std::vector<NamedTensor> want, got;
  ASSERT_TRUE((*ref)->Run({{"x", x}}, &want).ok());
  Status s = (*fast)->Run({{"x", x}}, &got);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(got[0].tensor.shape(), want[0].tensor.shape());
  r->want = want[0].tensor;
  r->got = got[0].tensor;
}

// Fast against reference: |got - want| <= 1e-4 + 1e-4 |want| everywhere, except, when the
// output was requantized, values exactly step(i) off (oneDNN and the reference may round a value
// within float rounding of a step's midpoint differently), at most 0.5 % of them.
inline void ExpectCloseOrOneStep(const RefAndFast& r, bool requantized,
                                 const std::function<float(int64_t)>& step) {
  int64_t bad = 0, off_by_one = 0;
  for (int64_t i = 0; i < r.want.numel(); ++i) {
    const float w = r.want.data<float>()[i], g = r.got.data<float>()[i];
    if (requantized && std::fabs(g - w) > 1e-4f && std::fabs(std::fabs(g - w) - step(i)) < 1e-4f) {
      ++off_by_one;
      continue;
    }
    if (!(std::fabs(g - w) <= 1e-4f + 1e-4f * std::fabs(w)) && bad++ < 3)
      ADD_FAILURE() << "[" << i << "]: " << g << " vs " << w;
  }
  EXPECT_EQ(bad, 0);
  EXPECT_LE(off_by_one, r.want.numel() / 200) << "more than 0.5% one step off";
}

}  // namespace kiln::int8_test
