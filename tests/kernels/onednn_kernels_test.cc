// Every oneDNN CPU kernel against the reference kernels: small single- and few-node graphs with
// constant weights (so the fast kernels are eligible), run with SessionOptions::reference_only
// on and off. Shapes cover odd sizes, padding edges, strides, dilations, groups/depthwise,
// ceil_mode, broadcasts and blocked layouts flowing between oneDNN ops. Each case also asserts that
// the expected fast kernel was actually selected, so a case cannot pass by falling back.
// Tolerance: |fast - ref| <= 1e-4 + 1e-4 * |ref| (fp32 accumulation vs the reference's double).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>

#include "../runtime/model_builder.h"
#include "blocked_layout_expectations.h"
#include "kiln/diagnostics.h"
#include "kiln/session.h"

namespace kiln {
namespace {

using testing::ModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;

// A bf16 session refused because this CPU has neither AVX512-BF16 nor AMX: the one reason a bf16
// test may skip. Any other load failure fails the test.
bool NoBf16Here(const Status& s) {
  return s.code() == StatusCode::kUnsupported &&
         s.message().find("AVX512-BF16 or AMX") != std::string::npos;
}
#define KILN_SKIP_IF_NO_BF16(status)                                                              \
  do {                                                                                            \
    const Status& kiln_bf16_status = (status);                                                    \
    ASSERT_TRUE(NoBf16Here(kiln_bf16_status))                                                     \
        << "a bf16 load failed for another reason than the CPU: " << kiln_bf16_status.ToString(); \
    GTEST_SKIP() << "no bf16 on this CPU: " << kiln_bf16_status.message();                        \
  } while (0)

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

Tensor RandomTensor(const Shape& s, uint32_t seed) {
  return Tensor::FromVector<float>(Random(static_cast<size_t>(NumElements(s)), seed), s);
}

// Runs the model with reference kernels and with the default (fast) kernels; compares outputs
// and checks `expect_kernels` all appear in the fast plan.
// With `optimize`, the fast session also runs the graph passes (fusions), so the fused kernels
// are compared with the unfused reference graph.
void CheckAgainstReference(const std::string& bytes, const std::vector<NamedTensor>& inputs,
                           const std::vector<std::string>& expect_kernels, bool optimize = false,
                           bool tune = false) {
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

struct ConvCase {
  Shape x;
  int64_t m, k, stride, pad, dilation, group;
  bool bias;
  std::string auto_pad;
};

class ConvKernelTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvKernelTest, MatchesReference) {
  const ConvCase& c = GetParam();
  const int64_t cin = c.x[1];
  ModelBuilder mb;
  mb.Input("x", kF32, c.x).OutputAnyShape("y", kF32);
  const size_t nsp = c.x.size() - 2;
  Shape ws = {c.m, cin / c.group};
  for (size_t i = 0; i < nsp; ++i) ws.push_back(c.k);
  mb.FloatInit("w", ws, Random(static_cast<size_t>(NumElements(ws)), 1));
  std::vector<std::string> ins = {"x", "w"};
  if (c.bias) {
    mb.FloatInit("b", {c.m}, Random(static_cast<size_t>(c.m), 2));
    ins.push_back("b");
  }
  auto& n = mb.Node("Conv", ins, {"c"});
  ModelBuilder::IntAttr(n, "group", c.group);
  ModelBuilder::IntsAttr(n, "strides", std::vector<int64_t>(nsp, c.stride));
  ModelBuilder::IntsAttr(n, "dilations", std::vector<int64_t>(nsp, c.dilation));
  if (c.auto_pad.empty()) {
    ModelBuilder::IntsAttr(n, "pads", std::vector<int64_t>(2 * nsp, c.pad));
  } else {
    auto* a = n.add_attribute();
    a->set_name("auto_pad");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(c.auto_pad);
  }
  // Consumes the output: eltwise on oneDNN's layout when the convolution wrote a blocked one,
  // cpu.relu.small when it wrote a small plain one.
  mb.Node("Relu", {"c"}, {"y"});
  CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor(c.x, 3)}},
                        {"cpu.conv.onednn", "cpu.relu.onednn|cpu.relu.small"});
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvKernelTest,
    ::testing::Values(ConvCase{{1, 3, 17, 13}, 8, 3, 1, 1, 1, 1, true, ""},
                      ConvCase{{2, 16, 15, 15}, 32, 3, 2, 1, 1, 1, true, ""},
                      ConvCase{{1, 16, 9, 11}, 16, 3, 1, 1, 1, 16, true, ""},  // depthwise
                      ConvCase{{1, 32, 14, 14}, 32, 5, 2, 2, 1, 32, false, ""},
                      ConvCase{{1, 8, 12, 12}, 12, 3, 1, 2, 2, 2, true, ""},  // dilated, grouped
                      ConvCase{{1, 24, 7, 7}, 64, 1, 1, 0, 1, 1, true, ""},
                      ConvCase{{1, 4, 10, 9}, 6, 4, 3, 0, 1, 1, true, "SAME_UPPER"},
                      ConvCase{{1, 4, 10, 9}, 6, 4, 3, 0, 1, 1, false, "SAME_LOWER"},
                      ConvCase{{2, 5, 23}, 7, 3, 2, 1, 1, 1, true, ""},         // 1-D
                      ConvCase{{1, 3, 6, 7, 5}, 4, 3, 1, 1, 1, 1, true, ""}));  // 3-D

// Gelu-20 in both forms, standalone (cpu.gelu.onednn: gelu_erf / gelu_tanh), after a
// convolution's blocked output, and fused into FusedMatMul by the optimizer.
// The bf16 tests skip only for the CPU's reason, never for another load failure.
TEST(Bf16SkipTest, OnlyTheCpusReasonSkips) {
  EXPECT_TRUE(NoBf16Here(Status(StatusCode::kUnsupported,
                                "precision bf16 needs a CPU with AVX512-BF16 or AMX; this one has "
                                "neither")));
  EXPECT_FALSE(NoBf16Here(Status(StatusCode::kInvalidModel, "node 'c': bad pads")));
  EXPECT_FALSE(NoBf16Here(Status(StatusCode::kUnsupported, "no kernel for Conv")));
}

TEST(OneDnnKernelTest, GeluBothForms) {
  for (const char* approximate : {"none", "tanh"}) {
    SCOPED_TRACE(approximate);
    ModelBuilder mb(20);
    mb.Input("x", kF32, {3, 400}).Output("y", kF32, {});  // above cpu.gelu.small's limit
    auto& g = mb.Node("Gelu", {"x"}, {"y"});
    ModelBuilder::StringAttr(g, "approximate", approximate);
    CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor({3, 400}, 7)}}, {"cpu.gelu.onednn"});

    ModelBuilder mm(20);
    mm.Input("x", kF32, {4, 16}).Output("y", kF32, {});
    mm.FloatInit("w", {16, 8}, Random(128, 8));
    mm.FloatInit("b", {8}, Random(8, 9));
    mm.Node("MatMul", {"x", "w"}, {"m"});
    mm.Node("Add", {"m", "b"}, {"a"});
    auto& g2 = mm.Node("Gelu", {"a"}, {"y"});
    ModelBuilder::StringAttr(g2, "approximate", approximate);
    CheckAgainstReference(mm.Bytes(), {{"x", RandomTensor({4, 16}, 10)}},
                          {"cpu.fusedmatmul.onednn"}, /*optimize=*/true);
  }
}

TEST(OneDnnKernelTest, PoolsOnBlockedInput) {
  for (int variant = 0; variant < 5; ++variant) {
    ModelBuilder mb;
    mb.Input("x", kF32, {2, 16, 11, 13}).Output("y", kF32, {});
    mb.FloatInit("w", {16, 16, 1, 1}, Random(256, 4));
    mb.Node("Conv", {"x", "w"}, {"c"});
    std::string kernel;
    if (variant == 0 || variant == 1) {
      auto& p = mb.Node("MaxPool", {"c"}, {"y"});
      ModelBuilder::IntsAttr(p, "kernel_shape", {3, 3});
      ModelBuilder::IntsAttr(p, "strides", {2, 2});
      ModelBuilder::IntsAttr(p, "pads", {1, 0, 1, 0});
      ModelBuilder::IntAttr(p, "ceil_mode", variant);
      kernel = "cpu.maxpool.onednn";
    } else if (variant == 2 || variant == 3) {
      auto& p = mb.Node("AveragePool", {"c"}, {"y"});
      ModelBuilder::IntsAttr(p, "kernel_shape", {3, 2});
      ModelBuilder::IntsAttr(p, "pads", {1, 1, 1, 1});
      ModelBuilder::IntAttr(p, "count_include_pad", variant - 2);
      kernel = "cpu.averagepool.onednn";
    } else {
      mb.Node("GlobalAveragePool", {"c"}, {"y"});
      kernel = "cpu.globalaveragepool.channels";  // the conv's channels-last output
    }
    SCOPED_TRACE(variant);
    CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor({2, 16, 11, 13}, 5)}},
                          {"cpu.conv.onednn", kernel});
  }
}

// Pools reading a plain input (a graph input, or a non-oneDNN producer's output): reordered
// channels-last into scratch first. 1-3 spatial dims, channel counts off the vector width.
TEST(OneDnnKernelTest, PoolsOnPlainInput) {
  const std::vector<Shape> shapes = {{2, 5, 17}, {1, 12, 11, 9}, {1, 3, 6, 7, 5}};
  for (size_t v = 0; v < 2 * shapes.size(); ++v) {
    const Shape& x = shapes[v % shapes.size()];
    const size_t spatial = x.size() - 2;
    const bool is_max = v < shapes.size();
    ModelBuilder mb;
    mb.Input("x", kF32, x).Output("y", kF32, {});
    auto& p = mb.Node(is_max ? "MaxPool" : "AveragePool", {"x"}, {"y"});
    ModelBuilder::IntsAttr(p, "kernel_shape", std::vector<int64_t>(spatial, 3));
    ModelBuilder::IntsAttr(p, "strides", std::vector<int64_t>(spatial, 2));
    ModelBuilder::IntsAttr(p, "pads", std::vector<int64_t>(2 * spatial, 1));
    SCOPED_TRACE(v);
    CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor(x, 6 + static_cast<uint32_t>(v))}},
                          {is_max ? "cpu.maxpool.onednn" : "cpu.averagepool.onednn"});
  }
}

// Squeeze-excite shape: Mul(scale[N,C,1,1], x[N,C,H,W]) with the broadcast operand first, and a
// residual Add of two blocked conv outputs.
TEST(OneDnnKernelTest, BinaryBroadcastAndBlockedOperands) {
  ModelBuilder mb;
  mb.Input("x", kF32, {2, 32, 9, 9}).Output("y", kF32, {});
  mb.FloatInit("w1", {32, 32, 3, 3}, Random(32 * 32 * 9, 6));
  mb.FloatInit("w2", {32, 32, 1, 1}, Random(32 * 32, 7));
  auto& c1 = mb.Node("Conv", {"x", "w1"}, {"a"});
  ModelBuilder::IntsAttr(c1, "pads", {1, 1, 1, 1});
  mb.Node("Conv", {"x", "w2"}, {"b"});
  mb.Node("Add", {"a", "b"}, {"s"});
  mb.Node("GlobalAveragePool", {"s"}, {"g"});
  mb.Node("Sigmoid", {"g"}, {"sg"});
  mb.Node("Mul", {"sg", "s"}, {"m"});
  mb.Node("Sub", {"m", "x"}, {"y"});
  CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor({2, 32, 9, 9}, 8)}},
                        {"cpu.add.onednn", "cpu.mul.channel_scale", "cpu.sub.onednn"});
}

// Full-size operands in different layouts (a plain tensor and a blocked convolution output, as in
// ConvNeXt's residual Add): the second is reordered into the first's layout before the primitive.
TEST(OneDnnKernelTest, MixedLayoutFullSizeOperands) {
  ModelBuilder mb;
  mb.Input("x", kF32, {1, 24, 7, 9}).Output("y", kF32, {});
  mb.FloatInit("w", {24, 24, 3, 3}, Random(24 * 24 * 9, 12));
  ModelBuilder::IntsAttr(mb.Node("Conv", {"x", "w"}, {"c"}), "pads", {1, 1, 1, 1});
  mb.Node("Sub", {"x", "c"}, {"d"});  // plain first, blocked second; not commutative
  mb.Node("Add", {"d", "c"}, {"y"});
  CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor({1, 24, 7, 9}, 13)}},
                        {"cpu.sub.onednn", "cpu.add.onednn"});
}

TEST(OneDnnKernelTest, GemmVariants) {
  for (int transb = 0; transb < 2; ++transb) {
    for (float beta : {0.f, 1.f, 0.5f}) {
      ModelBuilder mb;
      mb.Input("a", kF32, {5, 7}).Output("y", kF32, {});
      mb.FloatInit("b", transb ? Shape{9, 7} : Shape{7, 9}, Random(63, 9));
      mb.FloatInit("c", {9}, Random(9, 10));
      auto& g = mb.Node("Gemm", {"a", "b", "c"}, {"y"});
      ModelBuilder::IntAttr(g, "transB", transb);
      auto* a = g.add_attribute();
      a->set_name("beta");
      a->set_type(onnx::AttributeProto::FLOAT);
      a->set_f(beta);
      a = g.add_attribute();
      a->set_name("alpha");
      a->set_type(onnx::AttributeProto::FLOAT);
      a->set_f(transb ? 1.5f : 1.f);
      SCOPED_TRACE(std::to_string(transb) + " " + std::to_string(beta));
      CheckAgainstReference(mb.Bytes(), {{"a", RandomTensor({5, 7}, 11)}}, {"cpu.gemm.onednn"});
    }
  }
}

TEST(OneDnnKernelTest, MatMulFoldsLeadingDims) {
  ModelBuilder mb;
  mb.Input("a", kF32, {2, 3, 5, 8}).Output("y", kF32, {});
  mb.FloatInit("b", {8, 6}, Random(48, 12));
  mb.Node("MatMul", {"a", "b"}, {"y"});
  CheckAgainstReference(mb.Bytes(), {{"a", RandomTensor({2, 3, 5, 8}, 13)}}, {"cpu.matmul.onednn"});
}

// N a multiple of 64: B is packed with padded rows (see matmul_onednn.cc).
TEST(OneDnnKernelTest, MatMulPaddedWeightRows) {
  ModelBuilder mb;
  mb.Input("a", kF32, {3, 7, 40}).Output("y", kF32, {});
  mb.FloatInit("b", {40, 128}, Random(40 * 128, 30));
  mb.Node("MatMul", {"a", "b"}, {"y"});
  CheckAgainstReference(mb.Bytes(), {{"a", RandomTensor({3, 7, 40}, 31)}}, {"cpu.matmul.onednn"});
  ModelBuilder gb;
  gb.Input("a", kF32, {9, 24}).Output("y", kF32, {});
  gb.FloatInit("b", {64, 24}, Random(64 * 24, 32));
  gb.FloatInit("c", {64}, Random(64, 33));
  ModelBuilder::IntAttr(gb.Node("Gemm", {"a", "b", "c"}, {"y"}), "transB", 1);
  CheckAgainstReference(gb.Bytes(), {{"a", RandomTensor({9, 24}, 34)}}, {"cpu.gemm.onednn"});
}

// Both operands computed (attention's Q x K^T), batch dims equal, broadcast either way, ranks
// that differ, and a computed 2-D B.
TEST(OneDnnKernelTest, MatMulOfTwoComputedTensors) {
  const std::vector<std::pair<Shape, Shape>> cases = {{{2, 3, 5, 8}, {2, 3, 8, 6}},
                                                      {{2, 1, 5, 8}, {1, 3, 8, 6}},
                                                      {{5, 8}, {4, 8, 7}},
                                                      {{4, 2, 5, 8}, {8, 3}},
                                                      {{1, 12, 197, 64}, {1, 12, 64, 197}}};
  uint32_t seed = 40;
  for (const auto& [as, bs] : cases) {
    ModelBuilder mb;
    mb.Input("a", kF32, as).Input("b", kF32, bs).Output("y", kF32, {});
    mb.Node("MatMul", {"a", "b"}, {"y"});
    SCOPED_TRACE(ShapeToString(as) + " x " + ShapeToString(bs));
    CheckAgainstReference(mb.Bytes(),
                          {{"a", RandomTensor(as, seed++)}, {"b", RandomTensor(bs, seed++)}},
                          {"cpu.matmul.batched"});
  }
}

// Runs the model with reference kernels into `want` and with the default ones into `got`, after
// checking that the default plan uses `kernel` (for outputs that are not float32).
void RunReferenceAndFast(const std::string& bytes, const std::vector<NamedTensor>& inputs,
                         const std::string& kernel, std::vector<NamedTensor>* want,
                         std::vector<NamedTensor>* got) {
  SessionOptions ref_opts;
  ref_opts.reference_only = true;
  auto ref = Session::LoadFromBytes(bytes, ref_opts);
  auto fast = Session::LoadFromBytes(bytes);
  ASSERT_TRUE(ref.ok() && fast.ok());
  auto plan = (*fast)->DescribePlan(inputs);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_NE(plan->find(kernel), std::string::npos) << *plan;
  ASSERT_TRUE((*ref)->Run(inputs, want).ok());
  Status st = (*fast)->Run(inputs, got);
  ASSERT_TRUE(st.ok()) << st.ToString();
}

// An 8-bit initializer from raw bytes.
void Int8Init(ModelBuilder& mb, const std::string& name, int type, const Shape& dims,
              const std::vector<uint8_t>& bytes) {
  onnx::TensorProto& t = mb.FloatInit(name, dims, {});
  t.set_data_type(type);
  t.set_raw_data(std::string(bytes.begin(), bytes.end()));
}

// Whether oneDNN's int8 convolutions use VNNI-class dot products here (oneDNN then needs no
// weight split): `kiln doctor`'s int8 line, which follows oneDNN's effective ISA.
bool Int8VnniHere() {
  const std::string& int8 = DescribeCpu().int8;
  return int8.find("no VNNI") == std::string::npos && int8 != "none";
}

// Two int32 tensors of one shape are equal element for element (the first 3 differences shown).
void ExpectSameInt32(const Tensor& want, const Tensor& got) {
  int64_t bad = 0;
  for (int64_t i = 0; i < got.numel(); ++i)
    if (got.data<int32_t>()[i] != want.data<int32_t>()[i] && bad++ < 3)
      ADD_FAILURE() << "[" << i << "] " << got.data<int32_t>()[i] << " vs "
                    << want.data<int32_t>()[i];
  EXPECT_EQ(bad, 0);
}

// MatMulInteger as ONNX Runtime's quantize_dynamic writes it (uint8 A with a run-time zero
// point, int8 B) and the other forms: int8 A, per-column b_zero_point, uint8 B with and without a
// zero point (2 and 4 weight parts without VNNI). Full-range values, so a saturating 16-bit sum
// of products would show; integer results, so the comparison is exact. The `trained` cases have
// B - zero point within +-60 but for 3 % of full-range values (trained weights under a per-tensor
// scale): without VNNI those run as clamped weights plus the sparse correction, with 10 rows of A
// (a block of 8 and a partial one), and 150 (two rounds of blocks, the second partial).
TEST(OneDnnKernelTest, MatMulIntegerIsExact) {
  constexpr int kU8 = onnx::TensorProto::UINT8, kI8 = onnx::TensorProto::INT8;
  struct Case {
    int a_type, b_type;
    int b_zero;  // -1: none; -2: per column
    bool trained = false;
    int64_t batch = 2;  // A [batch, m, k]
  };
  const int64_t m = 5, k = 70, n = 33;
  std::mt19937 rng(50);
  std::uniform_int_distribution<int> byte(0, 255);
  auto bytes = [&](size_t count) {
    std::vector<uint8_t> v(count);
    for (auto& x : v) x = static_cast<uint8_t>(byte(rng));
    return v;
  };
  std::uniform_int_distribution<int> percent(0, 99), near(-60, 60);
  for (const Case& c : {Case{kU8, kI8, -1}, Case{kI8, kI8, -2}, Case{kU8, kU8, -1},
                        Case{kU8, kU8, 128}, Case{kI8, kU8, -2}, Case{kU8, kI8, -1, true},
                        Case{kI8, kU8, 128, true}, Case{kU8, kI8, -1, true, 30}}) {
    ModelBuilder mb(13);
    mb.Input("a", c.a_type, {c.batch, m, k}).Input("az", c.a_type, {});
    mb.Output("y", onnx::TensorProto::INT32, {});
    std::vector<uint8_t> b = bytes(static_cast<size_t>(k * n));
    if (c.trained)  // around the zero point (0, or 128 for uint8), 3 % left full-range
      for (auto& v : b)
        if (percent(rng) >= 3) v = static_cast<uint8_t>(near(rng) + (c.b_type == kU8 ? 128 : 0));
    Int8Init(mb, "b", c.b_type, {k, n}, b);
    std::vector<std::string> ins = {"a", "b", "az"};
    if (c.b_zero != -1) {
      Int8Init(mb, "bz", c.b_type, c.b_zero == -2 ? Shape{n} : Shape{},
               c.b_zero == -2 ? bytes(static_cast<size_t>(n))
                              : std::vector<uint8_t>{static_cast<uint8_t>(c.b_zero)});
      ins.push_back("bz");
    }
    mb.Node("MatMulInteger", ins, {"y"});
    const DataType at = c.a_type == kU8 ? DataType::kUInt8 : DataType::kInt8;
    Tensor a = Tensor::Empty(at, {c.batch, m, k});
    const std::vector<uint8_t> av = bytes(static_cast<size_t>(c.batch * m * k));
    std::memcpy(a.raw(), av.data(), av.size());
    Tensor az = Tensor::Empty(at, {});
    *static_cast<uint8_t*>(az.raw()) = static_cast<uint8_t>(byte(rng));
    const std::vector<NamedTensor> inputs = {{"a", a}, {"az", az}};
    SCOPED_TRACE(std::to_string(c.a_type) + " " + std::to_string(c.b_type) + " " +
                 std::to_string(c.b_zero) + (c.trained ? " trained" : ""));
    std::vector<NamedTensor> want, got;
    const bool sparse = c.trained && !Int8VnniHere();
    RunReferenceAndFast(mb.Bytes(), inputs,
                        sparse ? "cpu.matmulinteger.onednn[clamped weights + sparse rest]"
                               : "cpu.matmulinteger.onednn",
                        &want, &got);
    if (HasFatalFailure()) return;
    ASSERT_EQ(got[0].tensor.shape(), (Shape{c.batch, m, n}));
    ExpectSameInt32(want[0].tensor, got[0].tensor);
  }
}

// ConvInteger as ONNX Runtime's quantize_dynamic writes it (uint8 X with a run-time zero point,
// int8 W, 2 weight parts without VNNI) and the other forms: int8 X with and without a zero point,
// uint8 W with a per-channel zero point, groups, strides, asymmetric pads, dilation, 1-D, and
// depthwise (1 part for int8 W; for uint8 W without a zero point 3, 4 without VNNI). Full-range
// values, so a saturating 16-bit sum of products would show; integer results, so the comparison is
// exact.
TEST(OneDnnKernelTest, ConvIntegerIsExact) {
  constexpr int kU8 = onnx::TensorProto::UINT8, kI8 = onnx::TensorProto::INT8;
  struct Case {
    int x_type, w_type;
    bool x_zero;
    int w_zero;  // -1: none; -2: per output channel
    Shape x, w;
    int64_t group, stride, dilation;
    std::vector<int64_t> pads;
  };
  std::mt19937 rng(51);
  std::uniform_int_distribution<int> byte(0, 255);
  auto bytes = [&](size_t count) {
    std::vector<uint8_t> v(count);
    for (auto& b : v) b = static_cast<uint8_t>(byte(rng));
    return v;
  };
  const std::vector<Case> cases = {
      {kU8, kI8, true, -1, {2, 70, 9, 7}, {6, 70, 3, 3}, 1, 1, 1, {1, 1, 1, 1}},
      {kI8, kU8, true, -2, {1, 8, 10, 11}, {6, 4, 3, 2}, 2, 2, 1, {0, 1, 2, 0}},
      {kI8, kI8, false, -1, {1, 9, 6, 6}, {5, 9, 1, 1}, 1, 1, 1, {0, 0, 0, 0}},
      {kU8, kI8, true, 3, {1, 5, 13}, {4, 5, 3}, 1, 1, 2, {2, 1}},
      {kU8, kI8, true, -1, {1, 16, 8, 8}, {16, 1, 3, 3}, 16, 1, 1, {1, 1, 1, 1}},
      {kU8, kU8, true, -1, {1, 16, 8, 8}, {16, 1, 3, 3}, 16, 2, 1, {1, 1, 1, 1}},
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    ModelBuilder mb(13);
    mb.Input("x", c.x_type, c.x).Output("y", onnx::TensorProto::INT32, {});
    std::vector<std::string> ins = {"x", "w"};
    if (c.x_zero) {
      mb.Input("xz", c.x_type, {});
      ins.push_back("xz");
    }
    Int8Init(mb, "w", c.w_type, c.w, bytes(static_cast<size_t>(NumElements(c.w))));
    if (c.w_zero != -1) {
      if (!c.x_zero) ins.push_back("");
      Int8Init(mb, "wz", c.w_type, c.w_zero == -2 ? Shape{c.w[0]} : Shape{},
               c.w_zero == -2 ? bytes(static_cast<size_t>(c.w[0]))
                              : std::vector<uint8_t>{static_cast<uint8_t>(c.w_zero)});
      ins.push_back("wz");
    }
    auto& node = mb.Node("ConvInteger", ins, {"y"});
    ModelBuilder::IntAttr(node, "group", c.group);
    const size_t spatial = c.x.size() - 2;
    ModelBuilder::IntsAttr(node, "strides", std::vector<int64_t>(spatial, c.stride));
    ModelBuilder::IntsAttr(node, "dilations", std::vector<int64_t>(spatial, c.dilation));
    ModelBuilder::IntsAttr(node, "pads", c.pads);
    const DataType xt = c.x_type == kU8 ? DataType::kUInt8 : DataType::kInt8;
    Tensor x = Tensor::Empty(xt, c.x);
    const std::vector<uint8_t> xv = bytes(static_cast<size_t>(NumElements(c.x)));
    std::memcpy(x.raw(), xv.data(), xv.size());
    std::vector<NamedTensor> inputs = {{"x", x}};
    if (c.x_zero) {
      Tensor xz = Tensor::Empty(xt, {});
      *static_cast<uint8_t*>(xz.raw()) = static_cast<uint8_t>(byte(rng));
      inputs.push_back({"xz", xz});
    }
    SCOPED_TRACE("case " + std::to_string(ci));
    std::vector<NamedTensor> want, got;
    RunReferenceAndFast(mb.Bytes(), inputs, "cpu.convinteger.onednn", &want, &got);
    if (HasFatalFailure()) return;
    ASSERT_EQ(got[0].tensor.shape(), want[0].tensor.shape());
    ExpectSameInt32(want[0].tensor, got[0].tensor);
  }
}

// DynamicQuantizeLinear's loop against the reference, bit for bit: several threaded chunks,
// only positive values, all zeros (scale 0), and a NaN (skipped by the range, the zero point).
TEST(OneDnnKernelTest, DynamicQuantizeLinearLoop) {
  for (int form = 0; form < 4; ++form) {
    const int64_t n = form == 0 ? 100003 : 777;
    std::vector<float> x = Random(static_cast<size_t>(n), 60 + form);
    for (float& v : x) v = form == 1 ? 3.f * std::fabs(v) : form == 2 ? 0.f : 5.f * v;
    if (form == 3) x[17] = std::nanf("");
    ModelBuilder mb(13);
    mb.Input("x", kF32, {n}).Output("y", onnx::TensorProto::UINT8, {});
    mb.Output("s", kF32, {}).Output("z", onnx::TensorProto::UINT8, {});
    mb.Node("DynamicQuantizeLinear", {"x"}, {"y", "s", "z"});
    const std::vector<NamedTensor> inputs = {{"x", Tensor::FromVector<float>(x, {n})}};
    std::vector<NamedTensor> want, got;
    RunReferenceAndFast(mb.Bytes(), inputs, "cpu.dynamicquantizelinear.loop", &want, &got);
    if (HasFatalFailure()) return;
    SCOPED_TRACE(form);
    EXPECT_EQ(got[1].tensor.data<float>()[0], want[1].tensor.data<float>()[0]);
    EXPECT_EQ(got[2].tensor.data<uint8_t>()[0], want[2].tensor.data<uint8_t>()[0]);
    EXPECT_EQ(std::memcmp(got[0].tensor.raw(), want[0].tensor.raw(), static_cast<size_t>(n)), 0);
  }
}

// QuantizeLinear and DequantizeLinear's loops against the reference, bit for bit, for uint8 and
// int8 with a zero point: several threaded chunks and a tail no vector width divides, values past
// both ends of the range, exact midpoints between steps (rounded half to even), NaN and
// infinities. Whichever clone the CPU selects (x86-64, AVX2, AVX-512) must give these bytes.
TEST(OneDnnKernelTest, QuantizeAndDequantizeLoops) {
  for (const bool u8 : {true, false}) {
    SCOPED_TRACE(u8 ? "uint8" : "int8");
    const int type = u8 ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8;
    const uint8_t zp = u8 ? uint8_t{117} : static_cast<uint8_t>(int8_t{-3});
    const float scale = 0.0371f;
    const int64_t n = 100003;
    std::vector<float> x = Random(static_cast<size_t>(n), u8 ? 70 : 71);
    for (int64_t i = 0; i < n; ++i) {
      float& v = x[static_cast<size_t>(i)];
      v *= 200.f * scale;                                                  // past both ends
      if (i % 7 == 0) v = (static_cast<float>(i % 301) - 150.5f) * scale;  // midpoints
    }
    x[5] = std::nanf("");
    x[n - 1] = std::numeric_limits<float>::infinity();
    x[n - 2] = -std::numeric_limits<float>::infinity();
    ModelBuilder mb(13);
    mb.Input("x", kF32, {n}).Output("q", type, {}).Output("y", kF32, {});
    mb.FloatInit("s", {}, {scale});
    Int8Init(mb, "z", type, {}, {zp});
    mb.Node("QuantizeLinear", {"x", "s", "z"}, {"q"});
    mb.Node("DequantizeLinear", {"q", "s", "z"}, {"y"});
    const std::vector<NamedTensor> inputs = {{"x", Tensor::FromVector<float>(x, {n})}};
    std::vector<NamedTensor> want, got;
    RunReferenceAndFast(mb.Bytes(), inputs, "cpu.quantizelinear.loop", &want, &got);
    if (HasFatalFailure()) return;
    RunReferenceAndFast(mb.Bytes(), inputs, "cpu.dequantizelinear.loop", &want, &got);
    if (HasFatalFailure()) return;
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(std::memcmp(got[0].tensor.raw(), want[0].tensor.raw(), static_cast<size_t>(n)), 0);
    EXPECT_EQ(std::memcmp(got[1].tensor.raw(), want[1].tensor.raw(),
                          static_cast<size_t>(n) * sizeof(float)),
              0);
    // The values span the whole range, so a loop that clamped or rounded wrongly shows.
    int lo = 255, hi = -128;
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t b = static_cast<const uint8_t*>(got[0].tensor.raw())[i];
      const int v = u8 ? b : static_cast<int8_t>(b);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    EXPECT_EQ(lo, u8 ? 0 : -128);
    EXPECT_EQ(hi, u8 ? 255 : 127);
  }
}

// QuantizeLinear after a float convolution under --precision bf16 (the first convolution an int8
// model keeps float): the loop reads the bfloat16 values where the convolution wrote them (no
// conversion to plain float32 first) and quantizes them exactly as the reference quantizes the
// same values widened to float32 (the convolution's output, also a graph output here).
TEST(OneDnnKernelTest, QuantizeLoopReadsBf16ConvolutionOutputs) {
  for (const bool u8 : {true, false}) {
    SCOPED_TRACE(u8 ? "uint8" : "int8");
    const int type = u8 ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8;
    ModelBuilder mb(13);
    mb.Input("x", kF32, {2, 3, 33, 33}).Output("c", kF32, {}).Output("q", type, {});
    mb.FloatInit("w", {32, 3, 3, 3}, Random(32 * 27, 80));
    mb.FloatInit("s", {}, {0.013f});
    Int8Init(mb, "z", type, {}, {0});
    auto& conv = mb.Node("Conv", {"x", "w"}, {"c"});
    ModelBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
    ModelBuilder::IntsAttr(conv, "strides", {2, 2});
    mb.Node("QuantizeLinear", {"c", "s", "z"}, {"q"});
    SessionOptions opts;
    opts.precision = Precision::kBf16;
    auto s = Session::LoadFromBytes(mb.Bytes(), opts);
    if (!s.ok()) KILN_SKIP_IF_NO_BF16(s.status());
    const std::vector<NamedTensor> in = {{"x", RandomTensor({2, 3, 33, 33}, 81)}};
    auto plan = (*s)->DescribePlan(in);
    ASSERT_TRUE(plan.ok());
    const size_t q = plan->find("QuantizeLinear '");
    ASSERT_NE(q, std::string::npos) << *plan;
    EXPECT_NE(plan->find("cpu.quantizelinear.loop", q), std::string::npos) << *plan;
    EXPECT_EQ(plan->substr(0, q).find("to_plain"), std::string::npos)
        << "a conversion before the QuantizeLinear:\n"
        << *plan;
    EXPECT_NE(plan->find(":bf16"), std::string::npos) << *plan;
    std::vector<NamedTensor> out;
    ASSERT_TRUE((*s)->Run(in, &out).ok());
    ASSERT_EQ(out.size(), 2u);
    // The reference QuantizeLinear on the convolution's (bfloat16-valued) output.
    ModelBuilder qb(13);
    qb.Input("c", kF32, out[0].tensor.shape()).Output("q", type, {});
    qb.FloatInit("s", {}, {0.013f});
    Int8Init(qb, "z", type, {}, {0});
    qb.Node("QuantizeLinear", {"c", "s", "z"}, {"q"});
    SessionOptions ref;
    ref.reference_only = true;
    auto r = Session::LoadFromBytes(qb.Bytes(), ref);
    ASSERT_TRUE(r.ok());
    std::vector<NamedTensor> want;
    ASSERT_TRUE((*r)->Run({{"c", out[0].tensor}}, &want).ok());
    const auto n = static_cast<size_t>(want[0].tensor.numel());
    ASSERT_EQ(out[1].tensor.numel(), want[0].tensor.numel());
    EXPECT_EQ(std::memcmp(out[1].tensor.raw(), want[0].tensor.raw(), n), 0);
    int distinct = 0;
    std::vector<char> seen(256, 0);
    for (size_t i = 0; i < n; ++i) {
      const uint8_t b = static_cast<const uint8_t*>(out[1].tensor.raw())[i];
      distinct += !seen[b];
      seen[b] = 1;
    }
    EXPECT_GT(distinct, 50) << "the values should span much of the 8-bit range";
  }
}

// ConvNeXt's NCHW -> NHWC Transpose reading a blocked conv output, and a plain Transpose.
TEST(OneDnnKernelTest, TransposeBlockedAndPlain) {
  ModelBuilder mb;
  mb.Input("x", kF32, {2, 16, 5, 7}).Output("y", kF32, {}).Output("z", kF32, {});
  mb.FloatInit("w", {16, 16, 1, 1}, Random(256, 14));
  mb.Node("Conv", {"x", "w"}, {"c"});
  ModelBuilder::IntsAttr(mb.Node("Transpose", {"c"}, {"y"}), "perm", {0, 2, 3, 1});
  ModelBuilder::IntsAttr(mb.Node("Transpose", {"x"}, {"z"}), "perm", {3, 1, 0, 2});
  CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor({2, 16, 5, 7}, 15)}},
                        {"cpu.transpose.onednn"});
}

TEST(OneDnnKernelTest, LayerNormalization) {
  for (int64_t axis : {-1, 1}) {
    ModelBuilder mb(17);
    mb.Input("x", kF32, {3, 4, 10}).Output("y", kF32, {});
    const int64_t inner = axis == -1 ? 10 : 40;
    Shape ps = axis == -1 ? Shape{10} : Shape{4, 10};
    mb.FloatInit("g", ps, Random(static_cast<size_t>(inner), 16));
    mb.FloatInit("b", ps, Random(static_cast<size_t>(inner), 17));
    ModelBuilder::IntAttr(mb.Node("LayerNormalization", {"x", "g", "b"}, {"y"}), "axis", axis);
    SCOPED_TRACE(axis);
    CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor({3, 4, 10}, 18)}},
                          {"cpu.layernormalization.onednn"});
  }
}

// Fusions the optimizer makes, run by oneDNN post-ops, against the unfused reference graph:
// a ResNet block (Conv -> Add -> Relu), ReLU6 (Clip 0..6) and SiLU (x * Sigmoid(x)).
TEST(OneDnnKernelTest, FusedConvPatterns) {
  ModelBuilder mb;
  mb.Input("x", kF32, {2, 8, 9, 9}).Output("y", kF32, {});
  mb.FloatInit("w1", {8, 8, 3, 3}, Random(8 * 8 * 9, 19));
  mb.FloatInit("b1", {8}, Random(8, 20));
  mb.FloatInit("w2", {8, 8, 1, 1}, Random(64, 21));
  mb.FloatInit("w3", {8, 8, 1, 1}, Random(64, 22));
  mb.FloatInit("lo", {}, {0.f});
  mb.FloatInit("hi", {}, {0.5f});
  ModelBuilder::IntsAttr(mb.Node("Conv", {"x", "w1", "b1"}, {"c1"}), "pads", {1, 1, 1, 1});
  mb.Node("Add", {"c1", "x"}, {"s1"});
  mb.Node("Relu", {"s1"}, {"r1"});
  mb.Node("Conv", {"r1", "w2"}, {"c2"});
  mb.Node("Clip", {"c2", "lo", "hi"}, {"r2"});
  mb.Node("Conv", {"r2", "w3"}, {"c3"});
  mb.Node("Sigmoid", {"c3"}, {"sg"});
  mb.Node("Mul", {"c3", "sg"}, {"m"});
  // A residual whose summand r2 is an arena value read last here: planned in place.
  mb.FloatInit("w4", {8, 8, 1, 1}, Random(64, 27));
  mb.Node("Conv", {"m", "w4"}, {"c4"});
  mb.Node("Add", {"c4", "r2"}, {"y"});
  CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor({2, 8, 9, 9}, 23)}},
                        {"cpu.fusedconv.onednn", "1 outputs written in place"},
                        /*optimize=*/true);
}

// SessionOptions::tune lowers a 1x1 convolution to a matmul when that runs faster; both variants
// (forced with KILN_TUNE_PICK) must equal the reference with bias, residual and every fusion.
TEST(OneDnnKernelTest, TunedOneByOneConvolutionBothVariants) {
  ModelBuilder mb;
  mb.Input("x", kF32, {2, 24, 7, 5}).Output("y", kF32, {});
  mb.FloatInit("w1", {40, 24, 1, 1}, Random(40 * 24, 31));
  mb.FloatInit("b1", {40}, Random(40, 32));
  mb.FloatInit("w2", {24, 40, 1, 1}, Random(24 * 40, 33));
  mb.FloatInit("w3", {24, 24, 3, 3}, Random(24 * 24 * 9, 34));
  mb.Node("Conv", {"x", "w1", "b1"}, {"c1"});
  mb.Node("Relu", {"c1"}, {"r1"});
  mb.Node("Conv", {"r1", "w2"}, {"c2"});
  mb.Node("Add", {"c2", "x"}, {"s"});  // residual: the sum post-op on the matmul
  mb.Node("Sigmoid", {"s"}, {"sg"});
  mb.Node("Mul", {"s", "sg"}, {"m"});
  ModelBuilder::IntsAttr(mb.Node("Conv", {"m", "w3"}, {"y"}), "pads", {1, 1, 1, 1});  // not 1x1
  const Tensor x = RandomTensor({2, 24, 7, 5}, 35);
  ::setenv("KILN_TUNE_PICK", "matmul", 1);
  CheckAgainstReference(mb.Bytes(), {{"x", x}}, {"cpu.fusedconv.onednn[matmul]"}, true, true);
  ::setenv("KILN_TUNE_PICK", "conv", 1);
  CheckAgainstReference(mb.Bytes(), {{"x", x}}, {"cpu.fusedconv.onednn"}, true, true);
  ::unsetenv("KILN_TUNE_PICK");
  CheckAgainstReference(mb.Bytes(), {{"x", x}}, {"cpu.fusedconv.onednn"}, true, true);  // timed
}

TEST(OneDnnKernelTest, PrecisionOption) {
  ModelBuilder mb;
  mb.Input("x", kF32, {1, 16, 12, 12}).Output("y", kF32, {});
  mb.FloatInit("w1", {32, 16, 3, 3}, Random(32 * 16 * 9, 24));
  mb.FloatInit("w2", {16, 32, 1, 1}, Random(16 * 32, 25));
  ModelBuilder::IntsAttr(mb.Node("Conv", {"x", "w1"}, {"c"}), "pads", {1, 1, 1, 1});
  mb.Node("Relu", {"c"}, {"r"});
  mb.Node("Conv", {"r", "w2"}, {"y"});
  SessionOptions bad;
  bad.precision = Precision::kFp16;
  auto s = Session::LoadFromBytes(mb.Bytes(), bad);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("fp32 or bf16"), std::string::npos) << s.status().message();

  SessionOptions bf16;
  bf16.precision = Precision::kBf16;
  auto b = Session::LoadFromBytes(mb.Bytes(), bf16);
  if (!b.ok()) KILN_SKIP_IF_NO_BF16(b.status());  // a CPU without AVX512-BF16/AMX
  auto f = Session::LoadFromBytes(mb.Bytes());
  ASSERT_TRUE(f.ok());
  Tensor x = RandomTensor({1, 16, 12, 12}, 26);
  auto plan = (*b)->DescribePlan({{"x", x}});
  ASSERT_TRUE(plan.ok());
  EXPECT_NE(plan->find(":bf16"), std::string::npos) << *plan;  // activations stored as bf16
  std::vector<NamedTensor> yb, yf;
  ASSERT_TRUE((*b)->Run({{"x", x}}, &yb).ok());
  ASSERT_TRUE((*f)->Run({{"x", x}}, &yf).ok());
  // bf16 keeps 8 mantissa bits: relative error of a 144-term dot product stays within ~1e-2 of
  // the output scale; the fp32 output is float32 either way.
  double num = 0, den = 0, dot = 0, nb = 0;
  for (int64_t i = 0; i < yf[0].tensor.numel(); ++i) {
    double a = yf[0].tensor.data<float>()[i], c = yb[0].tensor.data<float>()[i];
    num += (a - c) * (a - c);
    den += a * a;
    dot += a * c;
    nb += c * c;
  }
  EXPECT_LT(std::sqrt(num / den), 2e-2);
  EXPECT_GT(dot / std::sqrt(den * nb), 0.999);
}

// Squeeze-excite's per-channel scale and global average pooling as plain loops
// (backends/cpu/channel_ops.cc): channels-last operands straight from a convolution and plain
// ones from the graph inputs, the scale first or second, per sample or shared across the batch,
// x overwritten in place or still needed afterwards, few pixels (one partial sum) and many
// (one per thread), odd channel counts, ranks 3 to 5.
TEST(OneDnnKernelTest, ChannelScaleAndGlobalAverage) {
  struct Case {
    Shape x;
    bool after_conv, scale_first, shared_scale, reuse_x;
  };
  const Case cases[] = {
      {{2, 19, 12, 12}, true, false, false, false}, {{2, 19, 12, 12}, true, true, true, true},
      {{1, 40, 3, 5}, true, false, false, true},    {{3, 7, 9, 11}, false, false, false, false},
      {{2, 5, 17}, false, true, true, false},       {{1, 6, 3, 4, 5}, false, false, false, true},
  };
  uint32_t seed = 40;
  for (const Case& c : cases) {
    const int64_t ch = c.x[1];
    Shape s_shape(c.x.size(), 1);
    s_shape[0] = c.shared_scale ? 1 : c.x[0];
    s_shape[1] = ch;
    ModelBuilder mb;
    mb.Input("x", kF32, c.x).Output("y", kF32, {});
    std::string x = "x";
    if (c.after_conv) {
      mb.FloatInit("w", {ch, ch, 1, 1}, Random(static_cast<size_t>(ch * ch), seed++));
      mb.Node("Conv", {"x", "w"}, {"cx"});
      x = "cx";
    }
    // s = Sigmoid(GlobalAveragePool(x)) per sample, or a shared constant scale.
    std::string scale = "s";
    if (c.shared_scale) {
      mb.FloatInit("s", s_shape, Random(static_cast<size_t>(ch), seed++));
      mb.Node("GlobalAveragePool", {x}, {"g"});
    } else {
      mb.Node("GlobalAveragePool", {x}, {"g"});
      mb.Node("Sigmoid", {"g"}, {"s"});
    }
    mb.Node("Mul",
            c.scale_first ? std::vector<std::string>{scale, x} : std::vector<std::string>{x, scale},
            {"m"});
    // Keep g in the outputs' dependencies; with reuse_x, x is read again after the Mul.
    mb.Node("Add", {"m", c.reuse_x ? x : "m"}, {"a"});
    mb.Node("Mul", {"a", "g"}, {"y"});
    SCOPED_TRACE(ShapeToString(c.x));
    CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor(c.x, seed++)}},
                          {"cpu.mul.channel_scale", "cpu.globalaveragepool.channels"});
  }
}

// Under --precision bf16 the squeeze-excite loops read and write bf16 between convolutions:
// the same model with them and with oneDNN's binary/pooling kernels (KILN_DISABLE_KERNELS), both
// in bf16, at batch 1; at batch 3 they decline and oneDNN runs both plans. Both round
// the product to bf16 the same way; the sums differ only in order, so the outputs agree to
// bf16's precision: |a - b| <= 1e-2 * (1 + |b|).
TEST(OneDnnKernelTest, ChannelOpsInBf16MatchOneDnn) {
  for (int64_t batch : {1, 3}) {
    const Shape xs = {batch, 24, 16, 16};
    ModelBuilder mb;
    mb.Input("x", kF32, xs).Output("y", kF32, {});
    mb.FloatInit("w1", {24, 24, 1, 1}, Random(24 * 24, 50));
    mb.FloatInit("w2", {24, 24, 1, 1}, Random(24 * 24, 51));
    mb.FloatInit("w3", {16, 24, 1, 1}, Random(16 * 24, 52));
    mb.Node("Conv", {"x", "w1"}, {"c"});
    mb.Node("GlobalAveragePool", {"c"}, {"g"});
    mb.Node("Conv", {"g", "w2"}, {"f"});
    mb.Node("Sigmoid", {"f"}, {"s"});
    mb.Node("Mul", {"c", "s"}, {"m"});
    mb.Node("Conv", {"m", "w3"}, {"y"});
    SessionOptions opts;
    opts.precision = Precision::kBf16;
    auto ours = Session::LoadFromBytes(mb.Bytes(), opts);
    if (!ours.ok()) KILN_SKIP_IF_NO_BF16(ours.status());
    const std::vector<NamedTensor> in = {{"x", RandomTensor(xs, 53)}};
    auto plan = (*ours)->DescribePlan(in);
    ASSERT_TRUE(plan.ok());
    // Above batch 1, bf16 stays with oneDNN (measured faster there).
    const bool loops = batch == 1;
    EXPECT_EQ(plan->find("cpu.mul.channel_scale") != std::string::npos, loops) << *plan;
    EXPECT_EQ(plan->find("cpu.globalaveragepool.channels") != std::string::npos, loops) << *plan;
    EXPECT_NE(plan->find(":bf16"), std::string::npos) << *plan;
    ASSERT_EQ(
        setenv("KILN_DISABLE_KERNELS", "cpu.mul.channel_scale,cpu.globalaveragepool.channels", 1),
        0);
    auto theirs = Session::LoadFromBytes(mb.Bytes(), opts);
    ASSERT_TRUE(theirs.ok());
    auto plan2 = (*theirs)->DescribePlan(in);
    unsetenv("KILN_DISABLE_KERNELS");
    ASSERT_TRUE(plan2.ok());
    EXPECT_NE(plan2->find("cpu.mul.onednn"), std::string::npos) << *plan2;
    std::vector<NamedTensor> a, b;
    ASSERT_TRUE((*ours)->Run(in, &a).ok());
    ASSERT_TRUE((*theirs)->Run(in, &b).ok());
    const float* pa = a[0].tensor.data<float>();
    const float* pb = b[0].tensor.data<float>();
    int bad = 0;
    for (int64_t i = 0; i < a[0].tensor.numel(); ++i)
      if (!(std::fabs(pa[i] - pb[i]) <= 1e-2f * (1.f + std::fabs(pb[i]))) && bad++ < 3)
        ADD_FAILURE() << "batch " << batch << " [" << i << "]: " << pa[i] << " vs " << pb[i];
    EXPECT_EQ(bad, 0);
  }
}

// Concat on oneDNN: channels-last/blocked convolution outputs along channels (as in YOLO necks),
// three plain inputs along a middle axis, a negative axis, and a rank-1 concat.
TEST(OneDnnKernelTest, ConcatLayoutsAndAxes) {
  {
    ModelBuilder mb;
    mb.Input("x", kF32, {2, 8, 7, 9}).Output("y", kF32, {});
    mb.FloatInit("w1", {16, 8, 1, 1}, Random(128, 60));
    mb.FloatInit("w2", {5, 8, 3, 3}, Random(360, 61));
    mb.Node("Conv", {"x", "w1"}, {"a"});
    ModelBuilder::IntsAttr(mb.Node("Conv", {"x", "w2"}, {"b"}), "pads", {1, 1, 1, 1});
    ModelBuilder::IntAttr(mb.Node("Concat", {"a", "b", "x"}, {"c"}), "axis", 1);
    mb.Node("Relu", {"c"}, {"y"});
    CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor({2, 8, 7, 9}, 62)}},
                          {"cpu.concat.onednn"});
  }
  // Plain inputs: oneDNN above 64 KiB, block copies below (its fixed cost dominates there).
  for (const Shape& shape : {Shape{12, 40, 50}, Shape{3, 4, 5}}) {
    const bool big = shape[0] == 12;
    for (int64_t axis : {2, -1, 0}) {
      ModelBuilder mb;
      mb.Input("a", kF32, shape).Input("b", kF32, shape).Output("y", kF32, {});
      ModelBuilder::IntAttr(mb.Node("Concat", {"a", "b", "a"}, {"y"}), "axis", axis);
      SCOPED_TRACE(axis);
      CheckAgainstReference(mb.Bytes(),
                            {{"a", RandomTensor(shape, 63)}, {"b", RandomTensor(shape, 64)}},
                            {big ? "cpu.concat.onednn" : "cpu.concat.copy"});
    }
  }
  ModelBuilder mb;
  mb.Input("a", kF32, {7}).Input("b", kF32, {2}).Output("y", kF32, {}).Output("z", kF32, {});
  ModelBuilder::IntAttr(mb.Node("Concat", {"a", "b"}, {"y"}), "axis", 0);
  ModelBuilder::IntAttr(mb.Node("Concat", {"a", "b", "a", "b", "a"}, {"z"}), "axis", 0);
  CheckAgainstReference(mb.Bytes(), {{"a", RandomTensor({7}, 65)}, {"b", RandomTensor({2}, 66)}},
                        {"cpu.concat.copy"});
  // More than 4 inputs, some from convolutions: converted to plain and block-copied (measured
  // faster, see the kernel), also along an inner axis.
  ModelBuilder many;
  many.Input("x", kF32, {1, 8, 5, 5}).Output("y", kF32, {});
  many.FloatInit("w", {8, 8, 1, 1}, Random(64, 67));
  many.Node("Conv", {"x", "w"}, {"c"});
  many.Output("z", kF32, {});
  ModelBuilder::IntAttr(many.Node("Concat", {"c", "x", "c", "x", "c"}, {"y"}), "axis", 1);
  ModelBuilder::IntAttr(many.Node("Concat", {"x", "x", "c", "x", "x"}, {"z"}), "axis", 2);
  CheckAgainstReference(many.Bytes(), {{"x", RandomTensor({1, 8, 5, 5}, 68)}},
                        {"cpu.concat.copy", "to_plain"});
}

// Softmax / LogSoftmax on oneDNN: opset 13's single axis (first, middle, last) and opset 11's
// 2-D view at `axis`, with inputs large enough that a missing max-subtraction would overflow.
TEST(OneDnnKernelTest, SoftmaxAxesAndOpsets) {
  for (int opset : {11, 13}) {
    for (const char* op : {"Softmax", "LogSoftmax"}) {
      for (int64_t axis : {0, 1, -1}) {
        ModelBuilder mb(opset);
        mb.Input("x", kF32, {3, 4, 6}).Output("y", kF32, {});
        mb.FloatInit("k", {1}, {60.f});
        mb.Node("Mul", {"x", "k"}, {"big"});
        ModelBuilder::IntAttr(mb.Node(op, {"big"}, {"y"}), "axis", axis);
        SCOPED_TRACE(std::string(op) + " opset " + std::to_string(opset) + " axis " +
                     std::to_string(axis));
        const std::string lower = op == std::string("Softmax") ? "softmax" : "logsoftmax";
        CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor({3, 4, 6}, 70)}},
                              {"cpu." + lower + ".onednn"});
      }
    }
  }
}

// ConvTranspose on oneDNN against the reference: strides, pads, dilations, groups, bias,
// output_padding within the end pad, SAME_UPPER/LOWER, output_shape, 1-D and 3-D. Cases oneDNN
// cannot express (output_padding beyond the end pad, an output_shape beyond the natural size)
// must fall back to the reference kernel.
TEST(OneDnnKernelTest, ConvTransposeVariants) {
  struct Case {
    Shape x, w;
    std::vector<int64_t> strides, pads, dilations, output_padding, output_shape;
    int64_t group;
    bool bias;
    std::string auto_pad, kernel;
  };
  const std::string dn = "cpu.convtranspose.onednn", ref = "cpu.convtranspose.ref";
  const Case cases[] = {
      {{1, 4, 5, 5}, {4, 3, 3, 3}, {1, 1}, {}, {}, {}, {}, 1, false, "", dn},
      {{2, 4, 5, 6}, {4, 6, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, {}, {}, 1, true, "", dn},
      {{1, 6, 4, 4}, {6, 2, 4, 4}, {2, 2}, {1, 1, 1, 1}, {}, {}, {}, 3, true, "", dn},
      {{1, 4, 5, 5}, {4, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, {1, 1}, {}, 1, false, "", dn},
      {{1, 4, 5, 5}, {4, 3, 3, 3}, {2, 2}, {0, 0, 0, 0}, {}, {1, 1}, {}, 1, true, "", ref},
      {{1, 2, 6, 5}, {2, 3, 3, 2}, {1, 2}, {}, {2, 1}, {}, {}, 1, true, "", dn},
      {{1, 4, 5, 5}, {4, 2, 3, 3}, {2, 2}, {}, {}, {}, {}, 1, false, "SAME_UPPER", dn},
      {{1, 4, 5, 5}, {4, 2, 3, 3}, {2, 2}, {}, {}, {}, {}, 1, false, "SAME_LOWER", dn},
      {{1, 4, 5, 5}, {4, 2, 3, 3}, {2, 2}, {}, {}, {}, {10, 10}, 1, true, "", dn},
      {{1, 4, 5, 5}, {4, 2, 3, 3}, {2, 2}, {}, {}, {}, {13, 12}, 1, true, "", ref},
      {{2, 3, 9}, {3, 4, 5}, {3}, {1, 2}, {}, {}, {}, 1, true, "", dn},
      {{1, 2, 3, 4, 3}, {2, 2, 2, 3, 2}, {2, 1, 2}, {}, {}, {}, {}, 1, true, "", dn},
      // 8 output channels or more: blocked outputs, the bias added after oneDNN's direct
      // deconvolution (12 and 2 x 5 channels: a padded last block).
      {{1, 16, 6, 5}, {16, 12, 2, 2}, {2, 2}, {}, {}, {}, {}, 1, true, "", dn},
      {{2, 16, 5, 5}, {16, 5, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, {}, {}, 2, true, "", dn},
  };
  uint32_t seed = 80;
  for (const Case& c : cases) {
    ModelBuilder mb;
    mb.Input("x", kF32, c.x).Output("y", kF32, {});
    mb.FloatInit("w", c.w, Random(static_cast<size_t>(NumElements(c.w)), seed++));
    std::vector<std::string> ins = {"x", "w"};
    if (c.bias) {
      const int64_t m = c.w[1] * c.group;
      mb.FloatInit("b", {m}, Random(static_cast<size_t>(m), seed++));
      ins.push_back("b");
    }
    auto& n = mb.Node("ConvTranspose", ins, {"y"});
    if (!c.strides.empty()) ModelBuilder::IntsAttr(n, "strides", c.strides);
    if (!c.pads.empty()) ModelBuilder::IntsAttr(n, "pads", c.pads);
    if (!c.dilations.empty()) ModelBuilder::IntsAttr(n, "dilations", c.dilations);
    if (!c.output_padding.empty()) ModelBuilder::IntsAttr(n, "output_padding", c.output_padding);
    if (!c.output_shape.empty()) ModelBuilder::IntsAttr(n, "output_shape", c.output_shape);
    if (c.group != 1) ModelBuilder::IntAttr(n, "group", c.group);
    if (!c.auto_pad.empty()) ModelBuilder::StringAttr(n, "auto_pad", c.auto_pad);
    SCOPED_TRACE(ShapeToString(c.x) + " w" + ShapeToString(c.w) + " -> " + c.kernel);
    CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor(c.x, seed++)}}, {c.kernel});
  }
}

// cpu.gridsample.loops against GridSample's reference kernel: every mode, padding and
// align_corners, 4-D (opset 16's names) and 5-D (opset 20's), grid coordinates up to 1.3 outside
// [-1, 1] so every padding rule is exercised, more positions than one block of the kernel (64).
TEST(OneDnnKernelTest, GridSampleLoops) {
  uint32_t seed = 300;
  // Few channels: gathers from each plane; 20 and 260 (more than one pass of 256): channels-last
  // with 4 taps or more.
  for (const auto& [three_d, channels] :
       {std::pair{false, 5}, std::pair{true, 3}, std::pair{false, 20}, std::pair{true, 260}}) {
    const int opset = three_d ? 20 : 16;
    const Shape xs = three_d ? Shape{2, channels, 4, 5, 6} : Shape{2, channels, 7, 9};
    const Shape gs = three_d ? Shape{2, 3, 4, 7, 3} : Shape{2, 6, 13, 2};
    const std::vector<std::string> modes =
        three_d ? std::vector<std::string>{"linear", "nearest", "cubic"}
                : std::vector<std::string>{"bilinear", "nearest", "bicubic"};
    for (const std::string& mode : modes)
      for (const std::string pad : {"zeros", "border", "reflection"})
        for (const int64_t align : {0, 1}) {
          ModelBuilder mb(opset);
          mb.Input("x", kF32, xs).Input("grid", kF32, gs).Output("y", kF32, {});
          auto& n = mb.Node("GridSample", {"x", "grid"}, {"y"});
          ModelBuilder::StringAttr(n, "mode", mode);
          ModelBuilder::StringAttr(n, "padding_mode", pad);
          ModelBuilder::IntAttr(n, "align_corners", align);
          Tensor grid = RandomTensor(gs, seed++);
          for (int64_t i = 0; i < grid.numel(); ++i) grid.data<float>()[i] *= 2.3f;
          SCOPED_TRACE(mode + " " + pad + " align_corners " + std::to_string(align) +
                       (three_d ? " 5-D " : " 4-D ") + std::to_string(channels) + " channels");
          CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor(xs, seed++)}, {"grid", grid}},
                                {"cpu.gridsample.loops"});
        }
  }
}

// DeformConv on sampled columns and sgemm against the reference kernel (double accumulation):
// groups, offset groups that do not align with groups (one group's channels spanning two offset
// groups), strides, dilations, asymmetric pads, with and without mask and bias, W constant and
// computed, offsets that reach outside the input and a NaN offset; the last case has more
// output positions than one block of columns holds (two blocks).
TEST(OneDnnKernelTest, DeformConvOneDnn) {
  struct Case {
    Shape x;
    int64_t m, kh, kw, group, offset_group, stride, dilation;
    std::vector<int64_t> pads;
    bool mask, bias, constant_w;
  };
  const Case cases[] = {
      {{1, 4, 7, 6}, 5, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, true, true},
      {{2, 6, 8, 7}, 4, 3, 2, 2, 3, 2, 1, {0, 1, 2, 0}, true, false, false},
      {{1, 8, 9, 9}, 6, 2, 3, 2, 4, 1, 2, {1, 0, 1, 2}, false, true, true},
      {{2, 3, 5, 5}, 3, 1, 1, 3, 1, 1, 1, {0, 0, 0, 0}, false, false, true},
      {{1, 64, 32, 32}, 4, 3, 3, 1, 2, 1, 1, {1, 1, 1, 1}, true, true, true},
  };
  uint32_t seed = 700;
  for (const Case& c : cases) {
    const int64_t h = c.x[2], w = c.x[3];
    const int64_t oh = (h + c.pads[0] + c.pads[2] - (c.kh - 1) * c.dilation - 1) / c.stride + 1;
    const int64_t ow = (w + c.pads[1] + c.pads[3] - (c.kw - 1) * c.dilation - 1) / c.stride + 1;
    const int64_t taps = c.kh * c.kw;
    const Shape ws{c.m, c.x[1] / c.group, c.kh, c.kw};
    const Shape offs{c.x[0], c.offset_group * taps * 2, oh, ow};
    const Shape masks{c.x[0], c.offset_group * taps, oh, ow};
    ModelBuilder mb(19);
    mb.Input("x", kF32, c.x).Input("offset", kF32, offs).Output("y", kF32, {});
    std::vector<NamedTensor> feeds;
    feeds.push_back({"x", RandomTensor(c.x, seed++)});
    Tensor wt = RandomTensor(ws, seed++);
    if (c.constant_w)
      mb.FloatInit("w", ws, std::vector<float>(wt.data<float>(), wt.data<float>() + wt.numel()));
    else
      mb.Input("w", kF32, ws);
    // Offsets of up to +-3.5 pixels (many samples partly or wholly outside), one NaN.
    Tensor off = RandomTensor(offs, seed++);
    for (int64_t i = 0; i < off.numel(); ++i) off.data<float>()[i] *= 3.5f;
    off.data<float>()[off.numel() / 3] = std::nanf("");
    feeds.push_back({"offset", off});
    if (!c.constant_w) feeds.push_back({"w", wt});
    std::vector<std::string> inputs{"x", "w", "offset", c.bias ? "b" : ""};
    if (c.bias) mb.FloatInit("b", {c.m}, Random(static_cast<size_t>(c.m), seed++));
    if (c.mask) {
      mb.Input("mask", kF32, masks);
      feeds.push_back({"mask", RandomTensor(masks, seed++)});
      inputs.push_back("mask");
    }
    auto& n = mb.Node("DeformConv", inputs, {"y"});
    ModelBuilder::IntsAttr(n, "kernel_shape", {c.kh, c.kw});
    ModelBuilder::IntsAttr(n, "strides", {c.stride, c.stride});
    ModelBuilder::IntsAttr(n, "dilations", {c.dilation, c.dilation});
    ModelBuilder::IntsAttr(n, "pads", c.pads);
    ModelBuilder::IntAttr(n, "group", c.group);
    ModelBuilder::IntAttr(n, "offset_group", c.offset_group);
    SCOPED_TRACE("x " + ShapeToString(c.x) + " group " + std::to_string(c.group) +
                 " offset_group " + std::to_string(c.offset_group));
    CheckAgainstReference(mb.Bytes(), feeds, {"cpu.deformconv.onednn"});
  }
}

// Col2Im (fold) on the CPU's row loops against the reference kernel: 1-D to 4-D, strides (the
// strided inner loop), dilations, asymmetric pads that clip blocks at both ends, several images
// and channels.
TEST(OneDnnKernelTest, Col2ImLoops) {
  struct Case {
    std::vector<int64_t> image, block, strides, dilations, pads;
    int64_t n, c;
    std::string kernel;
  };
  const Case cases[] = {
      {{9, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 2, 3, "cpu.col2im.loops"},
      {{10, 11}, {2, 3}, {2, 3}, {1, 2}, {0, 2, 1, 0}, 1, 2, "cpu.col2im.loops"},
      {{7, 12}, {3, 2}, {1, 2}, {2, 1}, {2, 0, 0, 3}, 2, 1, "cpu.col2im.loops"},
      {{17}, {4}, {3}, {2}, {1, 2}, 2, 2, "cpu.col2im.loops"},
      {{5, 4, 6}, {2, 2, 3}, {1, 1, 2}, {1, 1, 1}, {0, 1, 0, 1, 0, 1}, 1, 2, "cpu.col2im.loops"},
      {{6, 5, 7}, {3, 2, 2}, {2, 1, 3}, {1, 2, 1}, {1, 0, 2, 0, 1, 1}, 2, 1, "cpu.col2im.loops"},
      {{3, 4, 3, 5},
       {2, 2, 1, 3},
       {1, 2, 1, 1},
       {1, 1, 2, 1},
       {0, 1, 0, 1, 1, 0, 1, 0},
       1,
       2,
       "cpu.col2im.loops"},
  };
  uint32_t seed = 800;
  for (const Case& c : cases) {
    const size_t r = c.image.size();
    int64_t block_size = 1, blocks = 1;
    for (size_t d = 0; d < r; ++d) {
      block_size *= c.block[d];
      blocks *= (c.image[d] + c.pads[d] + c.pads[r + d] - (c.dilations[d] * (c.block[d] - 1) + 1)) /
                    c.strides[d] +
                1;
    }
    const Shape xs{c.n, c.c * block_size, blocks};
    ModelBuilder mb(18);
    mb.Input("x", kF32, xs).Output("y", kF32, {});
    const int64_t rank = static_cast<int64_t>(r);
    mb.Int64Init("image_shape", {rank}, c.image);
    mb.Int64Init("block_shape", {rank}, c.block);
    auto& n = mb.Node("Col2Im", {"x", "image_shape", "block_shape"}, {"y"});
    ModelBuilder::IntsAttr(n, "strides", c.strides);
    ModelBuilder::IntsAttr(n, "dilations", c.dilations);
    ModelBuilder::IntsAttr(n, "pads", c.pads);
    SCOPED_TRACE("image " + ShapeToString(c.image) + " block " + ShapeToString(c.block));
    CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor(xs, seed++)}}, {c.kernel});
  }
}

// AffineGrid on the CPU's row loops against the reference kernel: 2-D and 3-D, both
// align_corners, two thetas, a dim of length 1.
TEST(OneDnnKernelTest, AffineGridLoops) {
  uint32_t seed = 900;
  for (const std::vector<int64_t>& size :
       {std::vector<int64_t>{2, 3, 7, 9}, {2, 1, 1, 5}, {2, 4, 3, 5, 6}, {2, 1, 4, 1, 3}})
    for (const int64_t align : {0, 1}) {
      const int64_t r = static_cast<int64_t>(size.size()) - 2;
      const Shape ts{2, r, r + 1};
      ModelBuilder mb(20);
      mb.Input("theta", kF32, ts).Output("grid", kF32, {});
      mb.Int64Init("size", {static_cast<int64_t>(size.size())}, size);
      auto& n = mb.Node("AffineGrid", {"theta", "size"}, {"grid"});
      ModelBuilder::IntAttr(n, "align_corners", align);
      SCOPED_TRACE("size " + ShapeToString(size) + " align_corners " + std::to_string(align));
      CheckAgainstReference(mb.Bytes(), {{"theta", RandomTensor(ts, seed++)}},
                            {"cpu.affinegrid.loops"});
    }
}

// The sampling kernels after a convolution, whose output is blocked on AVX2 and AVX-512: bilinear
// GridSample (also with 8 channels, below the channels-last threshold) and DeformConv read that
// layout and reorder it themselves (no conversion step in the plan); nearest GridSample and the
// separable Resize get it converted to plain by the planner. Each is still its fast kernel (a
// kernel declining a layout would hand the node to the reference kernel) and matches the
// reference.
TEST(OneDnnKernelTest, SamplingOpsAfterAConvolution) {
  struct Case {
    std::string op, mode;
    int64_t channels;
    std::string kernel;
    bool reads_layout;
  };
  const Case cases[] = {
      {"GridSample", "bilinear", 24, "cpu.gridsample.loops[bilinear, channels-last]", true},
      {"GridSample", "bilinear", 8, "cpu.gridsample.loops[bilinear, channels-last]", true},
      {"GridSample", "nearest", 24, "cpu.gridsample.loops[nearest]", false},
      {"DeformConv", "", 24, "cpu.deformconv.onednn", true},
      {"Resize", "cubic", 24, "cpu.resize.separable", false},
  };
  uint32_t seed = 950;
  for (const Case& c : cases) {
    ModelBuilder mb(19);
    const Shape xs{1, 8, 12, 10}, ws{c.channels, 8, 3, 3};
    mb.Input("x", kF32, xs).Output("y", kF32, {});
    mb.FloatInit("cw", ws, Random(static_cast<size_t>(NumElements(ws)), seed++));
    auto& conv = mb.Node("Conv", {"x", "cw"}, {"f"});
    ModelBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
    std::vector<NamedTensor> feeds{{"x", RandomTensor(xs, seed++)}};
    if (c.op == "DeformConv") {
      const Shape offs{1, 18, 12, 10}, dws{6, c.channels, 3, 3};
      mb.Input("offset", kF32, offs);
      mb.FloatInit("dw", dws, Random(static_cast<size_t>(NumElements(dws)), seed++));
      auto& n = mb.Node("DeformConv", {"f", "dw", "offset"}, {"y"});
      ModelBuilder::IntsAttr(n, "kernel_shape", {3, 3});
      ModelBuilder::IntsAttr(n, "pads", {1, 1, 1, 1});
      Tensor off = RandomTensor(offs, seed++);
      for (int64_t i = 0; i < off.numel(); ++i) off.data<float>()[i] *= 2.f;
      feeds.push_back({"offset", off});
    } else if (c.op == "GridSample") {
      const Shape gs{1, 9, 7, 2};
      mb.Input("grid", kF32, gs);
      auto& n = mb.Node("GridSample", {"f", "grid"}, {"y"});
      ModelBuilder::StringAttr(n, "mode", c.mode);
      feeds.push_back({"grid", RandomTensor(gs, seed++)});
    } else {
      mb.FloatInit("roi", {0}, {});
      mb.FloatInit("scales", {4}, {1, 1, 1.5f, 2});
      auto& n = mb.Node("Resize", {"f", "roi", "scales"}, {"y"});
      ModelBuilder::StringAttr(n, "mode", c.mode);
    }
    SCOPED_TRACE(c.kernel + " " + std::to_string(c.channels) + " channels");
    CheckAgainstReference(mb.Bytes(), feeds, {"cpu.conv.onednn", c.kernel});
    auto s = Session::LoadFromBytes(mb.Bytes());
    ASSERT_TRUE(s.ok());
    auto plan = (*s)->DescribePlan(feeds);
    ASSERT_TRUE(plan.ok());
    // Where the convolution writes plain (no CPU today), there is nothing to read or convert.
    if (c.reads_layout && plan->find("@") != std::string::npos) {
      EXPECT_NE(plan->find(" 0 layout conversions"), std::string::npos) << *plan;
    }
  }
}

// Cast on the threads (cpu.cast.parallel) gives the reference kernel's bytes exactly: the same
// element conversion over ranges. 70,000 elements (several ranges) per (from, to) pair, floats
// with NaN, infinities and values past int64.
TEST(OneDnnKernelTest, CastParallelIsTheReference) {
  constexpr int kF16 = onnx::TensorProto::FLOAT16, kI32 = onnx::TensorProto::INT32,
                kI64 = onnx::TensorProto::INT64, kU8 = onnx::TensorProto::UINT8,
                kBool = onnx::TensorProto::BOOL;
  const Shape shape{7, 10000};
  Tensor x = RandomTensor(shape, 990);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] *= 70000.f;
  x.data<float>()[5] = std::nanf("");
  x.data<float>()[6] = INFINITY;
  x.data<float>()[7] = -1e30f;
  struct Pair {
    int mid, to;  // x (float32) -> mid -> to
  };
  for (const Pair& p : {Pair{kF16, kF32}, Pair{kI32, kF32}, Pair{kI64, kF32}, Pair{kU8, kF32},
                        Pair{kBool, kF32}, Pair{kF32, kF16}}) {
    ModelBuilder mb(13);
    mb.Input("x", kF32, shape).Output("y", p.to, {});
    auto& a = mb.Node("Cast", {"x"}, {"m"});
    ModelBuilder::IntAttr(a, "to", p.mid);
    auto& b = mb.Node("Cast", {"m"}, {"y"});
    ModelBuilder::IntAttr(b, "to", p.to);
    SCOPED_TRACE(std::to_string(p.mid) + " -> " + std::to_string(p.to));
    SessionOptions ref_opts;
    ref_opts.reference_only = true;
    auto ref = Session::LoadFromBytes(mb.Bytes(), ref_opts);
    auto fast = Session::LoadFromBytes(mb.Bytes());
    ASSERT_TRUE(ref.ok() && fast.ok());
    auto plan = (*fast)->DescribePlan({{"x", x}});
    ASSERT_TRUE(plan.ok());
    EXPECT_NE(plan->find("cpu.cast.parallel"), std::string::npos) << *plan;
    std::vector<NamedTensor> want, got;
    ASSERT_TRUE((*ref)->Run({{"x", x}}, &want).ok());
    ASSERT_TRUE((*fast)->Run({{"x", x}}, &got).ok());
    ASSERT_EQ(want[0].tensor.bytes(), got[0].tensor.bytes());
    EXPECT_EQ(std::memcmp(want[0].tensor.raw(), got[0].tensor.raw(), want[0].tensor.bytes()), 0);
  }
}

// Convolutions and deconvolutions with fewer than 8 output channels write plain outputs (a
// blocked one would pad each pixel to 8 or 16 channels for them and the elementwise steps
// after), and match the reference: a 16 -> 1 ConvTranspose then bias Add and Sigmoid (PP-OCR's
// probability map), a 16 -> 3 Conv; a 16 -> 8 Conv keeps oneDNN's choice.
TEST(OneDnnKernelTest, FewOutputChannelsArePlain) {
  uint32_t seed = 1200;
  for (const int64_t oc : {1, 3, 8}) {
    for (const bool transpose : {true, false}) {
      ModelBuilder mb(13);
      const Shape xs{1, 16, 12, 10};
      const Shape ws = transpose ? Shape{16, oc, 2, 2} : Shape{oc, 16, 3, 3};
      mb.Input("x", kF32, xs).Output("y", kF32, {});
      mb.FloatInit("w", ws, Random(static_cast<size_t>(NumElements(ws)), seed++));
      mb.FloatInit("b", {1}, {0.25f});
      auto& n = mb.Node(transpose ? "ConvTranspose" : "Conv", {"x", "w"}, {"c"});
      ModelBuilder::IntsAttr(
          n, transpose ? "strides" : "pads",
          transpose ? std::vector<int64_t>{2, 2} : std::vector<int64_t>{1, 1, 1, 1});
      mb.Node("Add", {"c", "b"}, {"a"});
      mb.Node("Sigmoid", {"a"}, {"y"});
      const std::string kernel = transpose ? "cpu.convtranspose.onednn" : "cpu.conv.onednn";
      SCOPED_TRACE(kernel + " to " + std::to_string(oc) + " channels");
      const Tensor x = RandomTensor(xs, seed++);
      CheckAgainstReference(mb.Bytes(), {{"x", x}}, {kernel});
      auto s = Session::LoadFromBytes(mb.Bytes());
      ASSERT_TRUE(s.ok());
      auto plan = (*s)->DescribePlan({{"x", x}});
      ASSERT_TRUE(plan.ok());
      if (oc < 8) {
        EXPECT_EQ(plan->find("@"), std::string::npos) << *plan;
      }
    }
  }
}

// A convolution whose residual is its own input, s + conv(s), with s's last reader that
// convolution and s in the layout the convolution writes (from a 1x1 convolution before): the
// memory planner must not let the output overwrite s (the kernel offers the residual's buffer
// for its output, but reads s as its source as well). The oneDNN kernel and the Winograd one
// (forced; AVX2 CPUs run it for this shape) against the reference.
TEST(OneDnnKernelTest, ResidualThatIsTheConvolutionsOwnInputIsNotOverwritten) {
  for (const bool winograd : {false, true}) {
    if (winograd && (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))) continue;
    if (winograd) {
      ASSERT_EQ(setenv("KILN_WINOGRAD", "force", 1), 0);
    }
    ModelBuilder mb(13);
    mb.Input("x", kF32, {2, 16, 12, 12}).Output("y", kF32, {});
    mb.FloatInit("w", {16, 16, 3, 3}, Random(16 * 16 * 9, 61));
    mb.FloatInit("b", {16}, Random(16, 62));
    mb.FloatInit("w0", {16, 16, 1, 1}, Random(16 * 16, 60));
    mb.Node("Conv", {"x", "w0"}, {"x0"});  // hands over oneDNN's layout, as the residual needs
    mb.Node("Sigmoid", {"x0"}, {"s"});
    ModelBuilder::IntsAttr(mb.Node("Conv", {"s", "w", "b"}, {"c"}), "pads", {1, 1, 1, 1});
    mb.Node("Add", {"c", "s"}, {"a"});
    mb.Node("Relu", {"a"}, {"y"});
    SCOPED_TRACE(winograd ? "winograd" : "onednn");
    CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor({2, 16, 12, 12}, 63)}},
                          {winograd ? "cpu.fusedconv.winograd" : "cpu.fusedconv.onednn",
                           "0 outputs written in place"},
                          /*optimize=*/true);
    unsetenv("KILN_WINOGRAD");
  }
}

// cpu.conv.winograd / cpu.fusedconv.winograd (F(4x4, 3x3)) against the double reference:
// partial edge tiles (sizes not multiples of 4), symmetric, asymmetric and no padding, K with a
// last panel of 8 channels, a plain graph input and a blocked one from a convolution, bias,
// residual Adds (summed in place) and the activations fused into it, both ways of running the
// chunks (per thread, and shared with each step split: transformed weights above 4 MB), and
// more than 256 input channels (the products then sum in two passes).
// KILN_WINOGRAD=force selects it on any CPU with AVX2 and FMA, whatever the tile count.
// Tolerance: CheckAgainstReference's 1e-4 + 1e-4 |ref|; the values are uniform in [-1, 1], so
// outputs reach |ref| ~ 10-20 with 144-1728 products each.
TEST(OneDnnKernelTest, ConvWinograd) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    GTEST_SKIP() << "needs AVX2 and FMA";
  ASSERT_EQ(setenv("KILN_WINOGRAD", "force", 1), 0);
  struct Case {
    Shape x;
    int64_t k;
    std::vector<int64_t> pads;
    std::string act;  // fused after the residual Add: "", "Relu", "Clip", "LeakyRelu"
    bool residual, bias, chain;
  };
  const Case cases[] = {
      {{2, 16, 13, 11}, 24, {1, 1, 1, 1}, "", false, true, false},
      {{1, 32, 9, 9}, 32, {0, 0, 0, 0}, "Relu", true, false, false},
      {{2, 16, 10, 7}, 16, {0, 1, 2, 1}, "Clip", true, true, true},
      {{1, 24, 6, 5}, 40, {2, 2, 2, 2}, "LeakyRelu", false, true, true},
      {{2, 16, 40, 40}, 16, {1, 1, 1, 1}, "Relu", true, true, true},   // 200 tiles: per thread
      {{1, 192, 9, 9}, 192, {1, 1, 1, 1}, "Relu", true, true, false},  // 5.3 MB: shared
      {{1, 264, 6, 6}, 16, {1, 1, 1, 1}, "", false, true, false},      // C > 256: two passes
  };
  uint32_t seed = 1500;
  for (const Case& c : cases) {
    const int64_t cin = c.x[1];
    ModelBuilder mb(13);
    mb.Input("x", kF32, c.x).Output("y", kF32, {});
    std::string in = "x";
    if (c.chain) {  // a first convolution (oneDNN's 1x1) hands over its blocked layout
      mb.FloatInit("w0", {cin, cin, 1, 1}, Random(static_cast<size_t>(cin * cin), seed++));
      mb.Node("Conv", {"x", "w0"}, {"x0"});
      in = "x0";
    }
    const Shape ws{c.k, cin, 3, 3};
    mb.FloatInit("w", ws, Random(static_cast<size_t>(NumElements(ws)), seed++));
    std::vector<std::string> ins = {in, "w"};
    if (c.bias) {
      mb.FloatInit("b", {c.k}, Random(static_cast<size_t>(c.k), seed++));
      ins.push_back("b");
    }
    ModelBuilder::IntsAttr(mb.Node("Conv", ins, {"c"}), "pads", c.pads);
    std::string last = "c";
    const int64_t oh = c.x[2] + c.pads[0] + c.pads[2] - 2, ow = c.x[3] + c.pads[1] + c.pads[3] - 2;
    // The residual: the Sigmoid of the chain's blocked input where the shapes allow (read last
    // by the Add, so summed in place), else a plain graph input (reordered first).
    const bool z_conv = c.residual && c.chain && oh == c.x[2] && ow == c.x[3] && c.k == cin;
    if (c.residual) {
      if (z_conv) {
        mb.Node("Sigmoid", {"x0"}, {"z"});
      } else {
        mb.Input("z", kF32, {c.x[0], c.k, oh, ow});
      }
      mb.Node("Add", {"c", "z"}, {"s"});
      last = "s";
    }
    if (c.act == "Clip") {
      mb.FloatInit("lo", {}, {-0.5f});
      mb.FloatInit("hi", {}, {2.f});
      mb.Node("Clip", {last, "lo", "hi"}, {"y"});
    } else if (!c.act.empty()) {
      mb.Node(c.act, {last}, {"y"});
    } else {
      mb.Node("Identity", {last}, {"y"});
    }
    SCOPED_TRACE("x " + ShapeToString(c.x) + " k " + std::to_string(c.k) + " " + c.act);
    std::vector<NamedTensor> inputs = {{"x", RandomTensor(c.x, seed++)}};
    if (c.residual && !z_conv) inputs.push_back({"z", RandomTensor({c.x[0], c.k, oh, ow}, seed++)});
    std::vector<std::string> expect = {c.residual || !c.act.empty() ? "cpu.fusedconv.winograd"
                                                                    : "cpu.conv.winograd"};
    // In place only where the chain's 1x1 convolution hands over aBcd8b (oneDNN on AVX2); on
    // AVX-512 it writes acdb, which the Winograd kernel reorders (a copy, not in place).
    if (z_conv && !__builtin_cpu_supports("avx512f"))
      expect.push_back("1 outputs written in place");
    CheckAgainstReference(mb.Bytes(), inputs, expect, /*optimize=*/true);
  }
  unsetenv("KILN_WINOGRAD");
}

// Resize/Upsample on oneDNN's resampling where it computes what ONNX defines (integer nearest
// upscales: YOLO's asymmetric/floor, half_pixel/round; half_pixel linear), against the
// reference; value-dependent misfits (a downscale, a scale that is not O/I) run the separable
// passes inside the kernel ("[separable]"); attribute misfits (cubic, antialias, align_corners,
// exclude_outside, tf_crop_and_resize with extrapolation) run on cpu.resize.separable.
TEST(OneDnnKernelTest, ResizeModes) {
  struct Case {
    std::string mode, coord, nearest;
    std::vector<float> scales;
    std::vector<int64_t> sizes;
    std::string expect;
    int opset = 13;
    int64_t antialias = 0, exclude_outside = 0;
    std::vector<float> roi = {};
  };
  // Values oneDNN does not compute as ONNX defines run on the separable passes inside its kernel;
  // attributes it cannot do at all on cpu.resize.separable, which runs the reference op where N
  // or C is resized.
  const std::string dn = "cpu.resize.onednn float32", in_sep = "cpu.resize.onednn[separable]",
                    sep = "cpu.resize.separable float32",
                    sep_ref = "cpu.resize.separable[reference]";
  const Case cases[] = {
      {"nearest", "asymmetric", "floor", {1, 1, 2, 2}, {}, dn},
      {"nearest", "half_pixel", "round_prefer_floor", {1, 1, 3, 2}, {}, dn},
      {"nearest", "pytorch_half_pixel", "round_prefer_ceil", {}, {2, 3, 15, 8}, dn},
      {"nearest", "asymmetric", "floor", {1, 1, 0.5f, 1}, {}, in_sep},
      {"nearest", "asymmetric", "floor", {1, 1, 2.5f, 2}, {}, in_sep},
      {"nearest", "align_corners", "round_prefer_floor", {1, 1, 2, 2}, {}, sep},
      {"nearest", "asymmetric", "round_prefer_floor", {1, 1, 2, 2}, {}, sep},
      {"nearest", "align_corners", "round_prefer_floor", {1, 2, 1, 1}, {}, sep_ref},
      {"linear", "half_pixel", "", {1, 1, 2, 2}, {}, dn},
      {"linear", "half_pixel", "", {}, {2, 3, 8, 11}, dn},
      {"linear", "pytorch_half_pixel", "", {}, {2, 3, 2, 8}, dn},
      {"linear", "pytorch_half_pixel", "", {1, 1, 0.5f, 2}, {}, in_sep},
      {"linear", "half_pixel", "", {1, 1, 2.5f, 2}, {}, in_sep},
      {"linear", "asymmetric", "", {1, 1, 2, 2}, {}, sep},
      {"linear", "align_corners", "", {}, {2, 3, 9, 7}, sep},
      {"cubic", "half_pixel", "", {1, 1, 2, 2}, {}, sep},
      {"cubic", "asymmetric", "", {1, 1, 1.5f, 2.5f}, {}, sep, 13, 0, 1},
      {"cubic", "half_pixel", "", {1, 1, 0.5f, 0.6f}, {}, sep, 18, 1},
      {"linear", "pytorch_half_pixel", "", {}, {2, 3, 3, 2}, sep, 18, 1},
      {"linear",
       "tf_crop_and_resize",
       "",
       {},
       {2, 3, 6, 5},
       sep,
       13,
       0,
       0,
       {0, 0, 0.2f, -0.1f, 1, 1, 0.9f, 1.3f}},
  };
  const Shape xs = {2, 3, 5, 4};
  uint32_t seed = 100;
  for (const Case& c : cases) {
    ModelBuilder mb(c.opset);
    mb.Input("x", kF32, xs).Output("y", kF32, {});
    mb.FloatInit("roi", {static_cast<int64_t>(c.roi.size())}, c.roi);
    std::vector<std::string> ins = {"x", "roi"};
    if (!c.scales.empty()) {
      mb.FloatInit("scales", {4}, c.scales);
      ins.push_back("scales");
    } else {
      mb.FloatInit("scales", {0}, {});
      mb.Int64Init("sizes", {4}, c.sizes);
      ins.push_back("scales");
      ins.push_back("sizes");
    }
    auto& n = mb.Node("Resize", ins, {"y"});
    ModelBuilder::StringAttr(n, "mode", c.mode);
    ModelBuilder::StringAttr(n, "coordinate_transformation_mode", c.coord);
    if (!c.nearest.empty()) ModelBuilder::StringAttr(n, "nearest_mode", c.nearest);
    if (c.antialias) ModelBuilder::IntAttr(n, "antialias", 1);
    if (c.exclude_outside) {
      ModelBuilder::IntAttr(n, "exclude_outside", 1);
      ModelBuilder::FloatAttr(n, "cubic_coeff_a", -0.5f);
    }
    if (!c.roi.empty()) ModelBuilder::FloatAttr(n, "extrapolation_value", 7.5f);
    SCOPED_TRACE(c.mode + " " + c.coord + " " + c.nearest + " -> " + c.expect);
    CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor(xs, seed++)}}, {c.expect});
  }
  // Upsample-9 (scales input) and Upsample-7 (scales attribute): asymmetric nearest.
  for (int opset : {7, 9}) {
    ModelBuilder mb(opset);
    mb.Input("x", kF32, xs).Output("y", kF32, {});
    std::vector<std::string> ins = {"x"};
    if (opset == 9) {
      mb.FloatInit("scales", {4}, {1, 1, 2, 3});
      ins.push_back("scales");
    }
    auto& n = mb.Node("Upsample", ins, {"y"});
    if (opset == 7) {
      auto* a = n.add_attribute();
      a->set_name("scales");
      a->set_type(onnx::AttributeProto::FLOATS);
      for (float v : {1.f, 1.f, 2.f, 3.f}) a->add_floats(v);
    }
    SCOPED_TRACE(opset);
    CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor(xs, seed++)}},
                          {"cpu.upsample.onednn float32"});
  }
}

// Inference BatchNormalization as a per-channel affine loop: plain inputs of rank 2 to 5 and a
// channels-last convolution output (the optimizer is off here, so nothing is folded), against
// the reference's double arithmetic.
TEST(OneDnnKernelTest, BatchNormalizationAffine) {
  const Shape shapes[] = {{3, 7}, {2, 5, 9}, {2, 6, 5, 7}, {1, 4, 3, 2, 5}};
  uint32_t seed = 120;
  for (int conv = 0; conv < 2; ++conv) {
    for (const Shape& xs : shapes) {
      if (conv && xs.size() != 4) continue;
      const int64_t c = xs[1];
      ModelBuilder mb;
      mb.Input("x", kF32, xs).Output("y", kF32, {});
      std::string x = "x";
      if (conv) {
        mb.FloatInit("w", {c, c, 1, 1}, Random(static_cast<size_t>(c * c), seed++));
        mb.Node("Conv", {"x", "w"}, {"cx"});
        x = "cx";
      }
      std::vector<float> var = Random(static_cast<size_t>(c), seed++);
      for (float& v : var) v = 0.5f + std::fabs(v);
      mb.FloatInit("scale", {c}, Random(static_cast<size_t>(c), seed++));
      mb.FloatInit("bias", {c}, Random(static_cast<size_t>(c), seed++));
      mb.FloatInit("mean", {c}, Random(static_cast<size_t>(c), seed++));
      mb.FloatInit("var", {c}, var);
      auto& bn = mb.Node("BatchNormalization", {x, "scale", "bias", "mean", "var"}, {"b"});
      ModelBuilder::FloatAttr(bn, "epsilon", 1e-3f);
      mb.Node("Relu", {"b"}, {"y"});
      SCOPED_TRACE(ShapeToString(xs) + (conv ? " after a conv" : ""));
      const Tensor x_in = RandomTensor(xs, seed++);
      CheckAgainstReference(mb.Bytes(), {{"x", x_in}}, {"cpu.batchnormalization.channels"});
      // With the optimizer: folded into the convolution, or fused with the Relu (one loop).
      if (!conv)
        CheckAgainstReference(mb.Bytes(), {{"x", x_in}}, {"cpu.fusedbatchnormalization.channels"},
                              /*optimize=*/true);
    }
  }
}

// Split as oneDNN reorders from sub-memory views: a channels-last convolution output split along
// channels into uneven parts and consumed by convolutions (YOLOv8's C2f) with no conversion to
// plain, plain inputs along other axes (equal parts and the split attribute), and under bf16.
TEST(OneDnnKernelTest, SplitLayoutsAndAxes) {
  {
    ModelBuilder mb(13);
    mb.Input("x", kF32, {2, 8, 6, 5}).Output("y", kF32, {});
    mb.FloatInit("w", {12, 8, 1, 1}, Random(96, 140));
    mb.FloatInit("w2", {4, 5, 3, 3}, Random(180, 141));
    mb.Int64Init("parts", {3}, {3, 5, 4});
    mb.Node("Conv", {"x", "w"}, {"c"});
    ModelBuilder::IntAttr(mb.Node("Split", {"c", "parts"}, {"a", "b", "d"}), "axis", 1);
    ModelBuilder::IntsAttr(mb.Node("Conv", {"b", "w2"}, {"bb"}), "pads", {1, 1, 1, 1});
    ModelBuilder::IntAttr(mb.Node("Concat", {"a", "bb", "d"}, {"y"}), "axis", 1);
    const std::vector<NamedTensor> in = {{"x", RandomTensor({2, 8, 6, 5}, 142)}};
    CheckAgainstReference(mb.Bytes(), in, {"cpu.split.onednn"});
    auto s = Session::LoadFromBytes(mb.Bytes());
    ASSERT_TRUE(s.ok());
    auto plan = (*s)->DescribePlan(in);
    ASSERT_TRUE(plan.ok());
    // One conversion only: the graph output's (none around the Split).
    EXPECT_NE(plan->find("1 layout conversions"), std::string::npos) << *plan;
  }
  // Plain input: oneDNN above 64 KiB, the reference's copies below.
  for (const Shape& shape : {Shape{80, 60, 6}, Shape{4, 3, 6}}) {
    for (int64_t axis : {0, 2, -1}) {
      ModelBuilder mb(11);
      mb.Input("x", kF32, shape).Output("p", kF32, {}).Output("q", kF32, {});
      auto& n = mb.Node("Split", {"x"}, {"p", "q"});
      ModelBuilder::IntAttr(n, "axis", axis);
      if (axis == 2) ModelBuilder::IntsAttr(n, "split", {1, 5});
      SCOPED_TRACE(axis);
      CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor(shape, 143)}},
                            {shape[0] == 80 ? "cpu.split.onednn" : "cpu.split.ref"});
    }
  }
}

// KILN_DISABLE_KERNELS removes named kernels from selection (the next candidate, here the
// reference, runs instead, with the same result); unset, the kernel is selected again.
TEST(OneDnnKernelTest, DisabledKernelsAreNotSelected) {
  ModelBuilder mb;
  mb.Input("a", kF32, {2, 8, 5, 5}).Input("b", kF32, {2, 8, 1, 1}).Output("y", kF32, {});
  mb.Node("Sub", {"a", "b"}, {"y"});
  const std::vector<NamedTensor> in = {{"a", RandomTensor({2, 8, 5, 5}, 30)},
                                       {"b", RandomTensor({2, 8, 1, 1}, 31)}};
  ASSERT_EQ(setenv("KILN_DISABLE_KERNELS", "cpu.mul.onednn,cpu.sub.onednn,cpu.sub.small", 1), 0);
  CheckAgainstReference(mb.Bytes(), in, {"cpu.sub.ref"});
  auto s = Session::LoadFromBytes(mb.Bytes());
  ASSERT_TRUE(s.ok());
  auto plan = (*s)->DescribePlan(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->find("cpu.sub.onednn"), std::string::npos) << *plan;
  EXPECT_EQ(plan->find("cpu.sub.small"), std::string::npos) << *plan;
  unsetenv("KILN_DISABLE_KERNELS");
  auto again = Session::LoadFromBytes(mb.Bytes());
  ASSERT_TRUE(again.ok());
  plan = (*again)->DescribePlan(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_NE(plan->find("cpu.sub.small"), std::string::npos) << *plan;
}

// LSTM's float loop against the double reference: both directions, bias, peepholes, initial
// state, both layouts, several steps and batch rows, all three outputs.
TEST(OneDnnKernelTest, LstmLoop) {
  const int64_t seq = 5, batch = 3, in = 7, dirs = 2;
  for (int64_t layout : {0, 1}) {
    const int64_t h = layout ? 19 : 6;  // 19: the gates' 8-wide vector paths and their tails
    ModelBuilder mb(14);
    const Shape xs = layout ? Shape{batch, seq, in} : Shape{seq, batch, in};
    const Shape ss = layout ? Shape{batch, dirs, h} : Shape{dirs, batch, h};
    mb.Input("x", kF32, xs).Input("h0", kF32, ss).Input("c0", kF32, ss);
    mb.Input("lens", onnx::TensorProto::INT32, {batch});  // {5, 2, 0} with layout 1
    mb.Output("y", kF32, {}).Output("yh", kF32, {}).Output("yc", kF32, {});
    mb.FloatInit("w", {dirs, 4 * h, in}, Random(dirs * 4 * h * in, 40));
    mb.FloatInit("r", {dirs, 4 * h, h}, Random(dirs * 4 * h * h, 41));
    mb.FloatInit("b", {dirs, 8 * h}, Random(dirs * 8 * h, 42));
    mb.FloatInit("p", {dirs, 3 * h}, Random(dirs * 3 * h, 43));
    auto& n = mb.Node("LSTM", {"x", "w", "r", "b", layout ? "lens" : "", "h0", "c0", "p"},
                      {"y", "yh", "yc"});
    ModelBuilder::StringAttr(n, "direction", "bidirectional");
    ModelBuilder::IntAttr(n, "hidden_size", h);
    ModelBuilder::IntAttr(n, "layout", layout);
    SCOPED_TRACE("layout " + std::to_string(layout));
    CheckAgainstReference(mb.Bytes(),
                          {{"x", RandomTensor(xs, 44)},
                           {"h0", RandomTensor(ss, 45)},
                           {"c0", RandomTensor(ss, 46)},
                           {"lens", Tensor::FromVector<int32_t>({5, 2, 0}, {batch})}},
                          {"cpu.lstm.loop"});
  }
}

// cpu.gru.loop (both linear_before_reset forms) and cpu.rnn.loop (Tanh, Relu) against the
// reference: forward, reverse and bidirectional, both layouts, with and without B and initial_h.
TEST(OneDnnKernelTest, GruAndRnnLoops) {
  const int64_t seq = 5, batch = 3, in = 7;
  struct Case {
    std::string op, direction;
    int64_t layout, lbr;
    bool bias, h0;
    std::string act;    // RNN only
    bool lens = false;  // sequence_lens {5, 2, 0}
  };
  int64_t h = 6;
  const std::vector<Case> cases = {{"GRU", "bidirectional", 0, 0, true, true, ""},
                                   {"GRU", "forward", 1, 1, true, false, ""},
                                   {"GRU", "reverse", 0, 1, false, true, ""},
                                   {"GRU", "bidirectional", 1, 0, false, false, ""},
                                   {"RNN", "bidirectional", 0, 0, true, true, ""},
                                   {"RNN", "reverse", 1, 0, true, false, "Relu"},
                                   {"RNN", "forward", 0, 0, false, true, "Tanh"},
                                   {"GRU", "bidirectional", 0, 0, true, true, "", true},
                                   {"GRU", "reverse", 1, 1, true, true, "", true},
                                   {"RNN", "bidirectional", 1, 0, true, false, "Tanh", true}};
  int seed = 300;
  for (const Case& c : cases) {
    h = h == 6 ? 21 : 6;  // 21: the gates' 8-wide vector paths and their tails
    const int64_t dirs = c.direction == "bidirectional" ? 2 : 1;
    const int64_t gates = c.op == "GRU" ? 3 : 1;
    ModelBuilder mb(14);
    const Shape xs = c.layout ? Shape{batch, seq, in} : Shape{seq, batch, in};
    const Shape ss = c.layout ? Shape{batch, dirs, h} : Shape{dirs, batch, h};
    mb.Input("x", kF32, xs).Output("y", kF32, {}).Output("yh", kF32, {});
    std::vector<NamedTensor> feeds = {{"x", RandomTensor(xs, ++seed)}};
    if (c.h0) {
      mb.Input("h0", kF32, ss);
      feeds.push_back({"h0", RandomTensor(ss, ++seed)});
    }
    mb.FloatInit("w", {dirs, gates * h, in}, Random(dirs * gates * h * in, ++seed));
    mb.FloatInit("r", {dirs, gates * h, h}, Random(dirs * gates * h * h, ++seed));
    if (c.bias) mb.FloatInit("b", {dirs, 2 * gates * h}, Random(dirs * 2 * gates * h, ++seed));
    if (c.lens) {
      mb.Input("lens", onnx::TensorProto::INT32, {batch});
      feeds.push_back({"lens", Tensor::FromVector<int32_t>({5, 2, 0}, {batch})});
    }
    auto& n =
        mb.Node(c.op, {"x", "w", "r", c.bias ? "b" : "", c.lens ? "lens" : "", c.h0 ? "h0" : ""},
                {"y", "yh"});
    ModelBuilder::StringAttr(n, "direction", c.direction);
    ModelBuilder::IntAttr(n, "hidden_size", h);
    ModelBuilder::IntAttr(n, "layout", c.layout);
    if (c.op == "GRU") ModelBuilder::IntAttr(n, "linear_before_reset", c.lbr);
    if (!c.act.empty())
      ModelBuilder::StringsAttr(n, "activations", std::vector<std::string>(dirs, c.act));
    SCOPED_TRACE(c.op + " " + c.direction + " h " + std::to_string(h) + " layout " +
                 std::to_string(c.layout) + " lbr " + std::to_string(c.lbr) + (c.bias ? " B" : "") +
                 (c.h0 ? " h0" : "") + (c.lens ? " lens" : "") + " " + c.act);
    CheckAgainstReference(mb.Bytes(), feeds, {c.op == "GRU" ? "cpu.gru.loop" : "cpu.rnn.loop"});
  }
}

// Bad recurrent layers fail with the rule and the value, on the fast and the reference kernels:
// sequence_lens past the sequence (at run time), and at load a wrong R, a hidden_size that W
// contradicts, a wrong number of activations and an unsupported activation.
TEST(OneDnnKernelTest, RecurrentLayersRefuseBadInput) {
  const int64_t seq = 5, batch = 3, in = 7, h = 6;
  struct Case {
    std::string what;
    Shape r;
    int64_t hidden;
    std::vector<std::string> acts;
    std::vector<int32_t> lens;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"lens", {1, 3 * h, h}, h, {}, {5, 9, 0}, "sequence_lens[1] must be in [0, 5]; got 9"},
      {"R", {1, 3 * h, h - 1}, h, {}, {5, 5, 5}, "R must be [1,18,6]; got [1,18,5]"},
      {"hidden", {1, 3 * h, h}, h + 1, {}, {5, 5, 5}, "W gives hidden size 6, hidden_size is 7"},
      {"acts", {1, 3 * h, h}, h, {"Sigmoid"}, {5, 5, 5}, "activations must list 2 per direction"},
      {"kind",
       {1, 3 * h, h},
       h,
       {"Sigmoid", "Softsign"},
       {5, 5, 5},
       "activation 'Softsign' is not supported"},
  };
  for (const Case& c : cases) {
    ModelBuilder mb(14);
    mb.Input("x", kF32, {seq, batch, in}).Input("lens", onnx::TensorProto::INT32, {batch});
    mb.Output("y", kF32, {});
    mb.FloatInit("w", {1, 3 * h, in}, Random(3 * h * in, 1));
    mb.FloatInit("r", c.r, Random(static_cast<size_t>(NumElements(c.r)), 2));
    auto& n = mb.Node("GRU", {"x", "w", "r", "", "lens"}, {"y"});
    ModelBuilder::IntAttr(n, "hidden_size", c.hidden);
    if (!c.acts.empty()) ModelBuilder::StringsAttr(n, "activations", c.acts);
    const std::vector<NamedTensor> feeds = {{"x", RandomTensor({seq, batch, in}, 3)},
                                            {"lens", Tensor::FromVector<int32_t>(c.lens, {batch})}};
    for (bool reference : {false, true}) {
      SCOPED_TRACE(c.what + (reference ? " reference" : " fast"));
      SessionOptions opts;
      opts.reference_only = reference;
      auto session = Session::LoadFromBytes(mb.Bytes(), opts);
      Status st = session.status();
      std::vector<NamedTensor> out;
      if (st.ok()) st = (*session)->Run(feeds, &out);
      ASSERT_FALSE(st.ok());
      EXPECT_NE(st.message().find(c.want), std::string::npos) << st.ToString();
    }
  }
}

// cpu.slice.copy against the reference: attention's Q/K/V split along the last axis, a middle
// axis, several axes with negative and clamped indices, steps (the strided gather) and Slice-1's
// attributes.
TEST(OneDnnKernelTest, SliceCopy) {
  struct Case {
    Shape x;
    std::vector<int64_t> starts, ends, axes, steps;
  };
  const std::vector<Case> cases = {
      {{2, 7, 96}, {32}, {64}, {-1}, {}},                     // one third of the last axis
      {{2, 7, 96}, {2}, {5}, {1}, {}},                        // a middle axis: runs of 96 floats
      {{3, 9, 40}, {1, -7, 8}, {3, 100, 40}, {0, 1, 2}, {}},  // clamped and negative
      {{4, 10, 33}, {0, 1}, {4, 10}, {0, 1}, {1, 3}},         // a step on a middle axis
      {{4, 10, 33}, {30, 8}, {0, 1}, {2, 1}, {-2, -3}},       // negative steps (the gather)
  };
  int seed = 400;
  for (const Case& c : cases) {
    ModelBuilder mb(13);
    mb.Input("x", kF32, c.x).Output("y", kF32, {});
    mb.Int64Init("s", {static_cast<int64_t>(c.starts.size())}, c.starts);
    mb.Int64Init("e", {static_cast<int64_t>(c.ends.size())}, c.ends);
    mb.Int64Init("a", {static_cast<int64_t>(c.axes.size())}, c.axes);
    std::vector<std::string> ins = {"x", "s", "e", "a"};
    if (!c.steps.empty()) {
      mb.Int64Init("st", {static_cast<int64_t>(c.steps.size())}, c.steps);
      ins.push_back("st");
    }
    mb.Node("Slice", ins, {"y"});
    SCOPED_TRACE(ShapeToString(c.x) + " starts " + std::to_string(c.starts[0]));
    CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor(c.x, ++seed)}}, {"cpu.slice.copy"});
  }
  {  // Slice-1: attributes
    ModelBuilder mb(9);
    mb.Input("x", kF32, {5, 6, 70}).Output("y", kF32, {});
    auto& n = mb.Node("Slice", {"x"}, {"y"});
    ModelBuilder::IntsAttr(n, "starts", {1, 5});
    ModelBuilder::IntsAttr(n, "ends", {4, 70});
    ModelBuilder::IntsAttr(n, "axes", {0, 2});
    CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor({5, 6, 70}, ++seed)}},
                          {"cpu.slice.copy"});
  }
}

// cpu.<op>.small (plain loops for small plain tensors, where a oneDNN call's fixed cost dominates)
// against the reference: every activation and unary math kind they take, chained so each reads
// the previous one's output (in place where the planner allows), and Add/Sub/Mul/Div with equal
// shapes, a one-element operand on either side and a general broadcast. Above the size limit the
// oneDNN kernels run instead.
TEST(OneDnnKernelTest, SmallLoops) {
  {
    ModelBuilder mb(20);
    mb.Input("x", kF32, {2, 3, 17}).Output("y", kF32, {});
    mb.FloatInit("lo", {}, {-0.3f});
    mb.FloatInit("hi", {}, {0.4f});
    mb.Node("Tanh", {"x"}, {"t"});
    ModelBuilder::FloatAttr(mb.Node("LeakyRelu", {"t"}, {"l"}), "alpha", 0.2f);
    mb.Node("Sigmoid", {"l"}, {"s"});
    mb.Node("Exp", {"s"}, {"e"});
    mb.Node("HardSwish", {"e"}, {"h"});
    ModelBuilder::FloatAttr(mb.Node("Elu", {"x"}, {"el"}), "alpha", 0.7f);
    mb.Node("Gelu", {"el"}, {"g"});
    mb.Node("Abs", {"g"}, {"a"});
    mb.Node("Sqrt", {"a"}, {"q"});
    mb.Node("Clip", {"x", "lo", "hi"}, {"c"});
    mb.Node("Relu", {"x"}, {"r"});
    mb.Node("Add", {"h", "q"}, {"s1"});  // equal shapes
    mb.Node("Mul", {"s1", "c"}, {"s2"});
    mb.Node("Sub", {"s2", "hi"}, {"s3"});  // one element on the right
    mb.Node("Div", {"lo", "s3"}, {"s4"});  // one element on the left
    mb.Node("Add", {"s4", "r"}, {"y"});
    CheckAgainstReference(
        mb.Bytes(), {{"x", RandomTensor({2, 3, 17}, 150)}},
        {"cpu.tanh.small", "cpu.leakyrelu.small", "cpu.sigmoid.small", "cpu.exp.small",
         "cpu.hardswish.small", "cpu.elu.small", "cpu.gelu.small", "cpu.abs.small",
         "cpu.sqrt.small", "cpu.clip.small", "cpu.relu.small", "cpu.add.small", "cpu.mul.small",
         "cpu.sub.small", "cpu.div.small"});
  }
  {  // general broadcast: [2,1,5] op [3,1]
    ModelBuilder mb;
    mb.Input("a", kF32, {2, 1, 5}).Input("b", kF32, {3, 1}).Output("y", kF32, {});
    mb.Node("Sub", {"a", "b"}, {"d"});
    mb.Node("Div", {"d", "b"}, {"y"});
    CheckAgainstReference(mb.Bytes(),
                          {{"a", RandomTensor({2, 1, 5}, 151)}, {"b", RandomTensor({3, 1}, 152)}},
                          {"cpu.sub.small", "cpu.div.small"});
  }
  {  // above the limits: oneDNN
    ModelBuilder mb;
    mb.Input("x", kF32, {4, 8192}).Output("y", kF32, {});
    mb.Node("Sigmoid", {"x"}, {"s"});
    mb.Node("Mul", {"s", "x"}, {"y"});
    CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor({4, 8192}, 153)}},
                          {"cpu.sigmoid.onednn", "cpu.mul.onednn"});
  }
}

}  // namespace
}  // namespace kiln
