// The int8 matrix product and average pooling: cpu.qmatmul.onednn (MatMul and Gemm in QDQ form)
// and cpu.qaveragepool.onednn (fuse_qdq_pool) against the reference kernels of the unfused QDQ
// graph, what the passes leave float, and malformed kiln.QMatMul / kiln.QAveragePool nodes.
#include <gtest/gtest.h>

#include "int8_test_util.h"

namespace kiln {
namespace {

using namespace int8_test;  // NOLINT(build/namespaces): test helpers

// A QDQ matrix product: Q/DQ on A, DQ on an int8 B (even values up to +-126, so the halved
// weights of CPUs without VNNI are exact), MatMul [-> Add] or Gemm, [-> Relu] [-> Q/DQ]. A's
// quantized values span the whole uint8/int8 range: with B up to +-126 a 16-bit pair sum
// (vpmaddubsw) would saturate, so a kernel that forgets to halve B without VNNI fails.
struct QMatMulCase {
  Shape a;
  int64_t n;
  bool gemm, trans_b, a_signed, per_column, bias, relu;
  int a_zero = 0;           // A's zero point (ONNX Runtime's asymmetric activations)
  bool requantize = false;  // -> QuantizeLinear -> DequantizeLinear: QMatMul writes uint8/int8
  int y_zero = 0;           // the requantization's zero point (int8 when relu is false)
  float alpha = 1.f, beta = 1.f;
  bool hard_sigmoid = false;  // HardSigmoid(0.3, 0.4) after relu's place: a linear step and a clip
};

class QMatMulKernelTest : public ::testing::TestWithParam<QMatMulCase> {};

TEST_P(QMatMulKernelTest, MatchesReference) {
  const QMatMulCase& c = GetParam();
  ModelBuilder mb(13);
  mb.Input("x", kF32, c.a).OutputAnyShape("y", kF32);
  const int64_t k = c.a.back();
  const Shape ws = c.trans_b ? Shape{c.n, k} : Shape{k, c.n};
  std::mt19937 rng(7);
  Int8Init(mb, "wq", ws, [&](int64_t) { return 2 * static_cast<int>(rng() % 127) - 126; });
  if (c.per_column) {
    std::vector<float> sw(static_cast<size_t>(c.n));
    for (int64_t i = 0; i < c.n; ++i) sw[i] = 0.0005f * static_cast<float>(1 + i % 5);
    mb.FloatInit("sw", {c.n}, sw);
  } else {
    mb.FloatInit("sw", {}, {0.001f});
  }
  mb.FloatInit("sx", {}, {0.02f});
  auto* zx = mb.proto().mutable_graph()->add_initializer();
  zx->set_name("zx");
  zx->set_data_type(c.a_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
  zx->set_raw_data(std::string(1, static_cast<char>(c.a_zero)));
  mb.Node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"});
  mb.Node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"});
  auto& dq = mb.Node("DequantizeLinear", {"wq", "sw"}, {"wd"});
  if (c.per_column) ModelBuilder::IntAttr(dq, "axis", c.trans_b ? 0 : 1);
  if (c.bias) mb.FloatInit("b", {c.n}, Uniform(static_cast<size_t>(c.n), 6, -2.f, 2.f));
  std::string last = "p";
  if (c.gemm) {
    std::vector<std::string> ins = {"xd", "wd"};
    if (c.bias) ins.push_back("b");
    auto& g = mb.Node("Gemm", ins, {"p"});
    ModelBuilder::IntAttr(g, "transB", c.trans_b ? 1 : 0);
    auto* alpha = g.add_attribute();
    alpha->set_name("alpha");
    alpha->set_type(onnx::AttributeProto::FLOAT);
    alpha->set_f(c.alpha);
    auto* beta = g.add_attribute();
    beta->set_name("beta");
    beta->set_type(onnx::AttributeProto::FLOAT);
    beta->set_f(c.beta);
  } else {
    mb.Node("MatMul", {"xd", "wd"}, {"p"});
    if (c.bias) {
      mb.Node("Add", {"p", "b"}, {"pb"});
      last = "pb";
    }
  }
  if (c.relu) {
    mb.Node("Relu", {last}, {"r"});
    last = "r";
  } else if (c.hard_sigmoid) {
    auto& hs = mb.Node("HardSigmoid", {last}, {"r"});
    ModelBuilder::FloatAttr(hs, "alpha", 0.3f);
    ModelBuilder::FloatAttr(hs, "beta", 0.4f);
    last = "r";
  }
  const bool unsigned_y = c.relu || c.hard_sigmoid;
  if (c.requantize) {
    mb.FloatInit("sy", {}, {c.hard_sigmoid ? 0.004f : 0.05f});
    auto* zy = mb.proto().mutable_graph()->add_initializer();
    zy->set_name("zy");
    zy->set_data_type(unsigned_y ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8);
    zy->set_raw_data(std::string(1, static_cast<char>(c.y_zero)));
    mb.Node("QuantizeLinear", {last, "sy", "zy"}, {"yq"});
    mb.Node("DequantizeLinear", {"yq", "sy", "zy"}, {"y"});
  } else {
    mb.Node("Identity", {last}, {"y"});
  }
  const std::string bytes = mb.Bytes();
  // A's quantized values over the whole range: x / 0.02 + zero point in [-128, 127] or [0, 255].
  const float lo = (c.a_signed ? -128.f : 0.f) - static_cast<float>(c.a_zero);
  Tensor x = Tensor::FromVector<float>(
      Uniform(static_cast<size_t>(NumElements(c.a)), 9, 0.02f * lo, 0.02f * (lo + 255.f)), c.a);
  RefAndFast r;
  RunRefAndFast(bytes, x, &r);
  if (HasFatalFailure()) return;
  const std::string* plan = &r.plan;
  // An int8 requantization with a zero point is written as uint8 (qdq_int8_to_uint8).
  EXPECT_NE(plan->find(c.requantize ? (unsigned_y || c.y_zero != 0 ? "cpu.qmatmul.onednn uint8"
                                                                   : "cpu.qmatmul.onednn int8")
                                    : "cpu.qmatmul.onednn float32"),
            std::string::npos)
      << *plan;
  for (const char* op : {"  Add '", "  Relu '", "  HardSigmoid '", "  Gemm '", "  MatMul '"})
    EXPECT_EQ(plan->find(op), std::string::npos) << op << " should be fused:\n" << *plan;
  // Only the output's DequantizeLinear (requantized) may remain.
  const size_t dq_at = plan->find("  DequantizeLinear '");
  EXPECT_EQ(dq_at == std::string::npos, !c.requantize) << *plan;
  if (dq_at != std::string::npos) {
    EXPECT_EQ(plan->find("  DequantizeLinear '", dq_at + 1), std::string::npos);
  }
  ExpectCloseOrOneStep(r, c.requantize, [&](int64_t) { return c.hard_sigmoid ? 0.004f : 0.05f; });
  float range = 0;
  for (int64_t i = 0; i < r.want.numel(); ++i)
    range = std::max(range, std::fabs(r.want.data<float>()[i]));
  EXPECT_GT(range, c.hard_sigmoid ? 0.5f : 1.f) << "the outputs should not be all (near) zero";
}

// Gemm with alpha 0 (Y = beta * C) is left float: its scales would be 0, and the int8 kernel's
// bias goes in divided by them. The pass folds its weight's DequantizeLinear (kept for it by
// fold_constants) into a float32 constant of the optimized graph, so the plan has nothing left to
// fold.
TEST(QMatMulPass, LeavesAlphaZeroGemmFloat) {
  ModelBuilder mb(13);
  mb.Input("x", kF32, {2, 8}).OutputAnyShape("y", kF32);
  Int8Init(mb, "wq", {8, 4}, [](int64_t) { return 6; });
  mb.FloatInit("sw", {}, {0.01f});
  mb.FloatInit("sx", {}, {0.02f});
  mb.FloatInit("c", {4}, {1.f, 2.f, 3.f, 4.f});
  ZeroPoints(mb, "zx", true, 0);
  mb.Node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"});
  mb.Node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"});
  mb.Node("DequantizeLinear", {"wq", "sw"}, {"wd"});
  auto& g = mb.Node("Gemm", {"xd", "wd", "c"}, {"y"});
  auto* alpha = g.add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(onnx::AttributeProto::FLOAT);
  alpha->set_f(0.f);
  RefAndFast r;
  RunRefAndFast(mb.Bytes(), Tensor::FromVector<float>(Uniform(16, 3), {2, 8}), &r);
  if (HasFatalFailure()) return;
  EXPECT_EQ(r.plan.find("QMatMul"), std::string::npos) << r.plan;
  const size_t dq_at = r.plan.find("  DequantizeLinear '");  // the input's
  EXPECT_NE(dq_at, std::string::npos) << r.plan;
  EXPECT_EQ(r.plan.find("  DequantizeLinear '", dq_at + 1), std::string::npos) << r.plan;
  EXPECT_NE(r.plan.find(" 0 nodes folded into constants"), std::string::npos)
      << "the weight's DequantizeLinear should be folded by the optimizer:\n"
      << r.plan;
  ExpectCloseOrOneStep(r, false, [](int64_t) { return 0.f; });
  EXPECT_FLOAT_EQ(r.got.data<float>()[3], 4.f);
}

// A hand-written kiln.QMatMul whose inputs do not fit (b_scale not [N], a float A) is refused,
// at load or when its plan is made, with a message naming the node and the rule.
TEST(QMatMulPass, MalformedNodeIsRefusedAtLoad) {
  for (const bool float_a : {false, true}) {
    ModelBuilder mb(13);
    auto* kiln = mb.proto().add_opset_import();
    kiln->set_domain("kiln");
    kiln->set_version(1);
    mb.Input("a", float_a ? kF32 : onnx::TensorProto::UINT8, {2, 8}).OutputAnyShape("y", kF32);
    Int8Init(mb, "b", {8, 4}, [](int64_t i) { return static_cast<int>(i % 7); });
    mb.FloatInit("sa", {}, {0.1f});
    mb.FloatInit("sb", {float_a ? 4 : 3},
                 float_a ? std::vector<float>{0.1f, 0.1f, 0.1f, 0.1f}
                         : std::vector<float>{0.1f, 0.1f, 0.1f});
    mb.Node("QMatMul", {"a", "sa", "", "b", "sb"}, {"y"}, "qm").set_domain("kiln");
    auto s = Session::LoadFromBytes(mb.Bytes(), SessionOptions{});
    std::string msg = s.status().ToString();
    if (s.ok()) {  // shapes are checked when a plan is made
      std::vector<NamedTensor> out;
      Tensor a = float_a ? Tensor::FromVector<float>(Uniform(16, 1), {2, 8})
                         : Tensor::Empty(DataType::kUInt8, {2, 8});
      Status r = (*s)->Run({{"a", a}}, &out);
      ASSERT_FALSE(r.ok());
      msg = r.ToString();
    }
    EXPECT_NE(msg.find("qm"), std::string::npos) << msg;
    EXPECT_NE(msg.find(float_a ? "Aq must be uint8 or int8" : "b_scale must be [N] with N = 4"),
              std::string::npos)
        << msg;
  }
}

// DequantizeLinear -> AveragePool / GlobalAveragePool -> QuantizeLinear (ONNX Runtime's and NNCF's
// form) runs as kiln.QAveragePool on oneDNN's int8 pooling: against the unfused graph's reference,
// equal but for values one output step off (a rounding tie), at most 0.5 % of them; QAveragePool's
// own reference kernel (optimized graph, reference kernels only) equal to the unfused graph's
// reference bit for bit.
struct QPoolCase {
  std::string pool;  // "AveragePool" or "GlobalAveragePool"
  Shape x;
  bool is_signed = false;
  int x_zero = 0, y_zero = 0;
  std::vector<int64_t> kernel = {3, 3}, strides = {1, 1}, pads = {0, 0, 0, 0};
  bool include_pad = false;
  bool fused = true;                                    // whether the pass makes a QAveragePool
  const char* kernel_name = "cpu.qaveragepool.onednn";  // the fast plan's kernel for it
  bool y_signed = false;                                // Y int8 whatever X is
};

constexpr float kQPoolYScale = 0.0337f;

void PrintTo(const QPoolCase& c, std::ostream* os) {
  *os << c.pool << " " << ShapeToString(c.x) << (c.is_signed ? " s8" : " u8") << " zp " << c.x_zero
      << "/" << c.y_zero << (c.include_pad ? " count_include_pad" : "");
}

class QAveragePoolTest : public ::testing::TestWithParam<QPoolCase> {};

TEST_P(QAveragePoolTest, MatchesTheUnfusedGraph) {
  const QPoolCase& c = GetParam();
  ModelBuilder mb(13);
  mb.Input("x", kF32, c.x).OutputAnyShape("y", kF32);
  // Scales whose ratio is no simple fraction, so few means sit on a rounding tie.
  mb.FloatInit("sx", {}, {0.031f});
  mb.FloatInit("sy", {}, {kQPoolYScale});
  ZeroPoints(mb, "zx", c.is_signed, 0, c.x_zero);
  ZeroPoints(mb, "zy", c.is_signed || c.y_signed, 0, c.y_zero);
  mb.Node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"});
  mb.Node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"});
  auto& p = mb.Node(c.pool, {"xd"}, {"p"}, "pool");
  if (c.pool == "AveragePool") {
    ModelBuilder::IntsAttr(p, "kernel_shape", c.kernel);
    ModelBuilder::IntsAttr(p, "strides", c.strides);
    ModelBuilder::IntsAttr(p, "pads", c.pads);
    if (c.include_pad) ModelBuilder::IntAttr(p, "count_include_pad", 1);
  }
  mb.Node("QuantizeLinear", {"p", "sy", "zy"}, {"pq"});
  mb.Node("DequantizeLinear", {"pq", "sy", "zy"}, {"y"});
  const std::string bytes = mb.Bytes();
  // Inputs over most of the 8-bit range around the zero point; each (n, c) plane centred on its
  // own level, so that the means spread over many output steps.
  const float lo = c.is_signed ? -3.5f : (0 - c.x_zero) * 0.031f,
              hi = c.is_signed ? 3.5f : (255 - c.x_zero) * 0.031f;
  std::vector<float> xv = Uniform(NumElements(c.x), 31, 0.f, 0.5f);
  const int64_t plane = NumElements(c.x) / (c.x[0] * c.x[1]);
  for (size_t i = 0; i < xv.size(); ++i) {
    const double level = std::fmod(0.37 * static_cast<double>(i / plane), 0.5);
    xv[i] = lo + (hi - lo) * (xv[i] + static_cast<float>(level));
  }
  const Tensor x = Tensor::FromVector<float>(xv, c.x);
  RefAndFast r;
  RunRefAndFast(bytes, x, &r);
  if (HasFatalFailure()) return;
  EXPECT_EQ(r.plan.find("QAveragePool") != std::string::npos, c.fused) << r.plan;
  if (c.fused) {
    EXPECT_NE(r.plan.find(c.kernel_name), std::string::npos) << r.plan;
  }
  ExpectCloseOrOneStep(r, true, [](int64_t) { return kQPoolYScale; });
  int64_t distinct = 0;
  std::set<float> seen;
  for (int64_t i = 0; i < r.want.numel(); ++i)
    distinct += seen.insert(r.want.data<float>()[i]).second;
  EXPECT_GT(distinct, 8) << "the outputs should spread over many steps";
  if (!c.fused) return;
  SessionOptions fused_ref;
  fused_ref.reference_only = true;
  auto s = Session::LoadFromBytes(bytes, fused_ref);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto plan = (*s)->DescribePlan({{"x", x}});
  ASSERT_TRUE(plan.ok());
  EXPECT_NE(plan->find("QAveragePool"), std::string::npos) << *plan;
  std::vector<NamedTensor> out;
  ASSERT_TRUE((*s)->Run({{"x", x}}, &out).ok());
  ASSERT_EQ(out[0].tensor.shape(), r.want.shape());
  EXPECT_EQ(std::memcmp(out[0].tensor.raw(), r.want.raw(),
                        static_cast<size_t>(r.want.numel()) * sizeof(float)),
            0)
      << "QAveragePool's reference kernel differs from the unfused graph's reference";
}

INSTANTIATE_TEST_SUITE_P(
    Pools, QAveragePoolTest,
    ::testing::Values(
        // pool, x, signed, x zp, y zp, kernel, strides, pads, include_pad, fused, kernel
        QPoolCase{"GlobalAveragePool", {2, 64, 7, 7}, false, 0, 0},
        QPoolCase{"GlobalAveragePool", {2, 40, 5, 5}, false, 128, 100},
        QPoolCase{"GlobalAveragePool", {3, 24, 6, 6}, true, 0, 0},
        QPoolCase{"GlobalAveragePool", {2, 16, 9}, true, -10, 5},  // one spatial dim
        QPoolCase{"AveragePool", {2, 32, 9, 9}, false, 120, 110, {3, 3}, {2, 2}, {1, 1, 1, 1}},
        QPoolCase{"AveragePool", {2, 16, 8, 8}, true, 0, 0, {2, 2}, {2, 2}},
        QPoolCase{"AveragePool", {1, 24, 7, 7}, false, 0, 0, {3, 3}, {1, 1}, {1, 1, 1, 1}, true},
        // Padded taps counted with a zero point: oneDNN would pad with code 0; left unfused.
        QPoolCase{"AveragePool",
                  {1, 24, 7, 7},
                  false,
                  100,
                  100,
                  {3, 3},
                  {1, 1},
                  {1, 1, 1, 1},
                  true,
                  false},
        // Y int8 from a uint8 X: QAveragePool on its reference kernel (oneDNN pools one type).
        QPoolCase{"AveragePool",
                  {1, 8, 6, 6},
                  false,
                  0,
                  0,
                  {2, 2},
                  {1, 1},
                  {0, 0, 0, 0},
                  false,
                  true,
                  "cpu.qaveragepool.ref",
                  true}));

// A hand-written kiln.QAveragePool that breaks its rules: named in the error, never a crash.
TEST(QAveragePoolOp, MalformedNodeIsRefusedWithItsRule) {
  struct Bad {
    const char* what;
    std::string expect;
  };
  for (const Bad& b :
       {Bad{"pool", "QAveragePool's pool must be"},
        Bad{"inputs", "QAveragePool takes 5 inputs; got 4"},
        Bad{"kernel", "kernel_shape is required"}, Bad{"float", "X must be uint8 or int8"},
        Bad{"y_zero", "y_zero_point must be one uint8 or int8 element"}}) {
    SCOPED_TRACE(b.what);
    const std::string what = b.what;
    ModelBuilder mb(13);
    mb.ImportDomain("kiln", 1);
    const auto xt = what == "float" ? kF32 : onnx::TensorProto::UINT8;
    mb.Input("x", xt, {1, 4, 6, 6}).OutputAnyShape("y", onnx::TensorProto::UINT8);
    mb.FloatInit("s", {}, {0.1f});
    ZeroPoints(mb, "z", false, what == "y_zero" ? 2 : 0);
    std::vector<std::string> in = {"x", "s", "", "s", "z"};
    if (what == "inputs") in.pop_back();
    auto& n = mb.Node("QAveragePool", in, {"y"}, "qp", "kiln");
    ModelBuilder::StringAttr(n, "pool", what == "pool" ? "MaxPool" : "AveragePool");
    ModelBuilder::IntAttr(n, "pool_opset", 13);
    if (what != "kernel") ModelBuilder::IntsAttr(n, "kernel_shape", {2, 2});
    auto s = Session::LoadFromBytes(mb.Bytes(), SessionOptions{});
    std::string msg = s.status().ToString();
    if (s.ok()) {
      std::vector<NamedTensor> out;
      Tensor x = what == "float" ? Tensor::FromVector<float>(Uniform(144, 1), {1, 4, 6, 6})
                                 : Tensor::Empty(DataType::kUInt8, {1, 4, 6, 6});
      Status r = (*s)->Run({{"x", x}}, &out);
      ASSERT_FALSE(r.ok());
      msg = r.ToString();
    }
    EXPECT_NE(msg.find("qp"), std::string::npos) << msg;
    EXPECT_NE(msg.find(b.expect), std::string::npos) << msg;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, QMatMulKernelTest,
    ::testing::Values(
        // a, n, gemm, trans_b, a_signed, per_column, bias, relu, a_zero, requantize, y_zero
        QMatMulCase{{4, 64}, 24, true, true, false, true, true, false},
        QMatMulCase{{3, 40}, 16, true, false, true, false, true, true},
        QMatMulCase{{2, 5, 48}, 32, false, false, false, true, true, true},
        QMatMulCase{{2, 3, 7, 32}, 8, false, false, true, true, false, false},
        // ONNX Runtime's asymmetric activations: zero points in A.
        QMatMulCase{{6, 96}, 40, true, true, false, true, true, false, 128},
        QMatMulCase{{2, 4, 64}, 16, false, false, true, true, true, false, -20},
        // Requantized outputs, with and without a zero point.
        QMatMulCase{{8, 64}, 24, true, true, false, true, true, true, 0, true},
        QMatMulCase{{2, 6, 32}, 16, false, false, true, true, true, false, 0, true, -5},
        QMatMulCase{{5, 64}, 20, true, true, false, true, true, true, 128, true, 10},
        // Gemm's alpha and beta.
        QMatMulCase{{4, 32}, 12, true, true, true, true, true, false, 0, false, 0, 0.5f, 2.f},
        // HardSigmoid before the requantization (its linear step and 1 / y_scale).
        QMatMulCase{
            {8, 64}, 24, true, true, false, true, true, false, 0, true, 0, 1.f, 1.f, true}));

}  // namespace
}  // namespace kiln
