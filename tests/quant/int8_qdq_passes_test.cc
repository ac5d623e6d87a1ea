// The QDQ graph passes against the unfused graph's reference: fuse_qdq_add (kiln.QAdd) and what
// it leaves float, MaxPool, Concat and the value-moving ops on the 8-bit values, a requantize
// of the same scale dropped, QOperator models expanded (expand_qlinear), and malformed
// kiln.QAdd and com.microsoft quantized nodes refused with their rules.
#include <gtest/gtest.h>

#include "int8_test_util.h"

namespace kiln {
namespace {

using namespace int8_test;  // NOLINT(build/namespaces): test helpers

// fuse_qdq_add: a residual Add with Q/DQ on every side (ONNX Runtime's quantize_static) becomes
// kiln.QAdd, bit for bit the unfused graph's result. A comes from a 1x1 convolution that only
// scales and permutes channels (exact in float32, so the fast and reference convolutions agree;
// the CPU keeps its output in a oneDNN layout) or from the input; B from the input (plain), so
// the operands arrive in different layouts; either order.
struct QAddCase {
  bool a_signed;
  int a_zero;
  bool b_signed;
  int b_zero;
  bool y_signed;
  int y_zero;
  bool relu, a_from_conv, swap;
};

class QAddKernelTest : public ::testing::TestWithParam<QAddCase> {};

TEST_P(QAddKernelTest, FusesAndMatchesTheUnfusedGraphExactly) {
  const QAddCase& c = GetParam();
  const int64_t ch = 8;
  ModelBuilder mb(13);
  mb.Input("x", kF32, {2, ch, 6, 6}).OutputAnyShape("y", kF32);
  std::string a_src = "x";
  if (c.a_from_conv) {
    std::vector<float> w(static_cast<size_t>(ch * ch), 0.f);
    for (int64_t o = 0; o < ch; ++o) w[o * ch + (o * 3 + 1) % ch] = o % 2 ? 0.5f : -2.f;
    mb.FloatInit("w", {ch, ch, 1, 1}, w);
    mb.Node("Conv", {"x", "w"}, {"a"});
    a_src = "a";
  }
  mb.FloatInit("sa", {}, {0.031f});
  ZeroPoints(mb, "za", c.a_signed, 0, c.a_zero);
  mb.FloatInit("sb", {}, {0.017f});
  ZeroPoints(mb, "zb", c.b_signed, 0, c.b_zero);
  mb.FloatInit("sy", {}, {0.043f});
  ZeroPoints(mb, "zy", c.y_signed, 0, c.y_zero);
  mb.Node("QuantizeLinear", {a_src, "sa", "za"}, {"aq"});
  mb.Node("DequantizeLinear", {"aq", "sa", "za"}, {"ad"});
  mb.Node("QuantizeLinear", {"x", "sb", "zb"}, {"bq"});
  mb.Node("DequantizeLinear", {"bq", "sb", "zb"}, {"bd"});
  mb.Node("Add",
          c.swap ? std::vector<std::string>{"bd", "ad"} : std::vector<std::string>{"ad", "bd"},
          {"s"});
  if (c.relu) mb.Node("Relu", {"s"}, {"r"});
  mb.Node("QuantizeLinear", {c.relu ? "r" : "s", "sy", "zy"}, {"yq"});
  mb.Node("DequantizeLinear", {"yq", "sy", "zy"}, {"y"});
  std::vector<float> v = Uniform(static_cast<size_t>(2 * ch * 36), 31, -4.f, 4.f);
  // Halfway cases of B's and A's scales.
  for (size_t i = 0; i < 16; ++i) v[i] = 0.017f * (static_cast<float>(i) - 8.f + 0.5f);
  RefAndFast r;
  RunRefAndFast(mb.Bytes(), Tensor::FromVector<float>(v, {2, ch, 6, 6}), &r);
  if (HasFatalFailure()) return;
  EXPECT_NE(r.plan.find("cpu.qadd.loop"), std::string::npos) << r.plan;
  EXPECT_EQ(r.plan.find("cpu.add."), std::string::npos) << r.plan;
  EXPECT_EQ(r.plan.find("Relu '"), std::string::npos) << r.plan;
  int64_t clipped = 0;
  double lo = c.y_signed ? -128 : 0, hi = c.y_signed ? 127 : 255;
  for (int64_t i = 0; i < r.want.numel(); ++i) {
    ASSERT_EQ(r.got.data<float>()[i], r.want.data<float>()[i]) << "[" << i << "]";
    const double q = std::nearbyint(r.want.data<float>()[i] / 0.043) + c.y_zero;
    clipped += q <= lo || q >= hi;
  }
  // (Zero point -128 without the ReLU clips the negative half, as the removed ReLU would.)
  EXPECT_LT(clipped, r.want.numel() * 2 / 3) << "the sums should mostly lie inside Y's range";
}

INSTANTIATE_TEST_SUITE_P(
    Operands, QAddKernelTest,
    ::testing::Values(
        // ONNX Runtime's ResNet: int8 operands with zero points (uint8 after qdq_int8_to_uint8),
        // the result after a removed ReLU at zero point -128.
        QAddCase{true, 16, true, -128, true, -128, false, true, false},
        QAddCase{true, 11, true, 16, true, -128, false, true, true},
        QAddCase{false, 100, false, 0, false, 0, true, true, false},
        QAddCase{false, 128, true, 0, true, 5, false, false, false},
        QAddCase{true, 0, false, 77, false, 128, true, false, true},
        QAddCase{true, 0, true, 0, true, 0, false, true, true}));

// What fuse_qdq_add leaves alone: a broadcast operand, and an Add whose float result is also read
// elsewhere. Both still run (float Add) and match the reference.
TEST(QAddPass, LeavesBroadcastsAndSharedSumsFloat) {
  for (bool broadcast : {true, false}) {
    SCOPED_TRACE(broadcast ? "broadcast" : "shared sum");
    ModelBuilder mb(13);
    mb.Input("x", kF32, {1, 4, 5, 5}).OutputAnyShape("y", kF32);
    mb.FloatInit("s", {}, {0.05f});
    ZeroPoints(mb, "z", false, 0, 128);
    mb.Node("QuantizeLinear", {"x", "s", "z"}, {"xq"});
    mb.Node("DequantizeLinear", {"xq", "s", "z"}, {"xd"});
    std::string other = "xd";
    if (broadcast) {
      Int8Init(mb, "cq", {1, 4, 1, 1}, [](int64_t i) { return static_cast<int>(i * 9 - 20); });
      mb.Node("DequantizeLinear", {"cq", "s"}, {"cd"});
      other = "cd";
    }
    mb.Node("Add", {"xd", other}, {"sum"});
    mb.Node("QuantizeLinear", {"sum", "s", "z"}, {"yq"});
    mb.Node("DequantizeLinear", {"yq", "s", "z"}, {"yd"});
    if (broadcast)
      mb.Node("Identity", {"yd"}, {"y"});
    else
      mb.Node("Mul", {"yd", "sum"}, {"y"});
    RefAndFast r;
    RunRefAndFast(mb.Bytes(), Tensor::FromVector<float>(Uniform(100, 4, -3.f, 3.f), {1, 4, 5, 5}),
                  &r);
    if (HasFatalFailure()) return;
    EXPECT_EQ(r.plan.find("QAdd"), std::string::npos) << r.plan;
    for (int64_t i = 0; i < r.want.numel(); ++i)
      EXPECT_NEAR(r.got.data<float>()[i], r.want.data<float>()[i], 1e-5f) << "[" << i << "]";
  }
}

// DequantizeLinear -> MaxPool -> QuantizeLinear with one scale and zero point: MaxPool on the
// 8-bit values (oneDNN's int8 pooling) alone, exactly the float result.
TEST(QdqMaxPool, PoolsTheQuantizedValuesExactly) {
  for (bool is_signed : {false, true})
    for (bool same_scale : {true, false}) {
      SCOPED_TRACE(std::string(is_signed ? "int8" : "uint8") +
                   (same_scale ? ", one scale" : ", two scales"));
      ModelBuilder mb(13);
      mb.Input("x", kF32, {2, 16, 9, 9}).OutputAnyShape("y", kF32);
      mb.FloatInit("s", {}, {0.03f});
      mb.FloatInit("s2", {}, {same_scale ? 0.03f : 0.04f});
      // (int8 with a zero point would become uint8 first: qdq_int8_to_uint8.)
      ZeroPoints(mb, "z", is_signed, 0, is_signed ? 0 : 131);
      mb.Node("QuantizeLinear", {"x", "s", "z"}, {"xq"});
      mb.Node("DequantizeLinear", {"xq", "s", "z"}, {"xd"});
      auto& pool = mb.Node("MaxPool", {"xd"}, {"p"});
      ModelBuilder::IntsAttr(pool, "kernel_shape", {3, 3});
      ModelBuilder::IntsAttr(pool, "strides", {2, 2});
      ModelBuilder::IntsAttr(pool, "pads", {1, 1, 1, 1});
      mb.Node("QuantizeLinear", {"p", "s2", "z"}, {"pq"});
      mb.Node("DequantizeLinear", {"pq", "s2", "z"}, {"y"});
      RefAndFast r;
      RunRefAndFast(mb.Bytes(),
                    Tensor::FromVector<float>(Uniform(2 * 16 * 81, 12, -3.f, 3.f), {2, 16, 9, 9}),
                    &r);
      if (HasFatalFailure()) return;
      // Another scale after it: the MaxPool still pools the 8-bit values, the DequantizeLinear
      // moved after it, and the QuantizeLinear stays.
      const std::string want = std::string("cpu.maxpool.onednn ") + (is_signed ? "int8" : "uint8");
      EXPECT_NE(r.plan.find(want), std::string::npos) << r.plan;
      EXPECT_EQ(r.plan.find("QuantizeLinear 'QuantizeLinear4'") == std::string::npos, same_scale)
          << r.plan;
      for (int64_t i = 0; i < r.want.numel(); ++i)
        ASSERT_EQ(r.got.data<float>()[i], r.want.data<float>()[i]) << "[" << i << "]";
    }
}

// Concat of DequantizeLinears with one scale and zero point (shared scales: `kiln quantize`,
// NNCF's unified ones) joins the 8-bit values; a QuantizeLinear of the same scale after it goes,
// another scale's stays (the DequantizeLinear moves after the Concat). Inputs with different
// scales are left float. Every case exactly the reference's result.
TEST(QdqConcat, JoinsTheQuantizedValuesWhenTheScalesAreShared) {
  // 5x5: small inputs (cpu.concat.copy); 64x64: oneDNN's concat.
  for (int64_t side : {5, 64})
    for (bool is_signed : {false, true})
      for (int variant :
           {0, 1, 2}) {  // 0: one scale throughout; 1: another after; 2: inputs differ
        SCOPED_TRACE(std::to_string(side) + "x" + std::to_string(side) + ", " +
                     (is_signed ? "int8" : "uint8") + ", variant " + std::to_string(variant));
        ModelBuilder mb(13);
        mb.Input("x", kF32, {2, 4, side, side}).OutputAnyShape("y", kF32);
        mb.FloatInit("s", {}, {0.03f});
        mb.FloatInit("sb", {}, {variant == 2 ? 0.02f : 0.03f});
        mb.FloatInit("s2", {}, {variant == 1 ? 0.05f : 0.03f});
        mb.FloatInit("half", {}, {0.5f});
        ZeroPoints(mb, "z", is_signed, 0, is_signed ? 0 : 120);
        mb.Node("QuantizeLinear", {"x", "s", "z"}, {"aq"});
        mb.Node("DequantizeLinear", {"aq", "s", "z"}, {"ad"});
        mb.Node("Mul", {"x", "half"}, {"xh"});
        mb.Node("QuantizeLinear", {"xh", "sb", "z"}, {"bq"});
        mb.Node("DequantizeLinear", {"bq", "sb", "z"}, {"bd"});
        ModelBuilder::IntAttr(mb.Node("Concat", {"ad", "bd", "ad"}, {"c"}), "axis", 1);
        mb.Node("QuantizeLinear", {"c", "s2", "z"}, {"cq"});
        mb.Node("DequantizeLinear", {"cq", "s2", "z"}, {"y"});
        RefAndFast r;
        RunRefAndFast(mb.Bytes(),
                      Tensor::FromVector<float>(Uniform(2 * 4 * side * side, 21, -5.f, 5.f),
                                                {2, 4, side, side}),
                      &r);
        if (HasFatalFailure()) return;
        const std::string eight = is_signed ? "int8" : "uint8";
        const std::string kernel = side == 5 ? "cpu.concat.copy " : "cpu.concat.onednn ";
        const bool joined = r.plan.find(kernel + eight) != std::string::npos;
        EXPECT_EQ(joined, variant != 2) << r.plan;
        // The QuantizeLinear after the Concat goes only when its scale is the inputs'.
        EXPECT_EQ(r.plan.find("QuantizeLinear 'QuantizeLinear7'") == std::string::npos,
                  variant == 0)
            << r.plan;
        ASSERT_EQ(r.want.numel(), 2 * 12 * side * side);
        for (int64_t i = 0; i < r.want.numel(); ++i)
          ASSERT_EQ(r.got.data<float>()[i], r.want.data<float>()[i]) << "[" << i << "]";
      }
}

// DequantizeLinear -> an op that only moves values (Split, Resize in mode nearest, Transpose,
// Reshape, Flatten, Unsqueeze, Slice, DepthToSpace) -> QuantizeLinear of the same scale: the op on
// the 8-bit values, no QuantizeLinear left; with another scale after it the DequantizeLinear moves
// after the op and the QuantizeLinear stays. Resize in mode linear is left float (it computes new
// values). Every case exactly the reference's result.
TEST(QdqPassThrough, MovesTheQuantizedValuesExactly) {
  for (const std::string op : {"Split", "Resize", "ResizeLinear", "Transpose", "Reshape", "Flatten",
                               "Unsqueeze", "Slice", "DepthToSpace"})
    for (bool is_signed : {false, true})
      for (bool same_scale : {true, false}) {
        SCOPED_TRACE(op + (is_signed ? ", int8" : ", uint8") +
                     (same_scale ? ", one scale" : ", two scales"));
        ModelBuilder mb(13);
        mb.Input("x", kF32, {2, 16, 8, 8}).OutputAnyShape("y", kF32);
        mb.FloatInit("s", {}, {0.03f});
        mb.FloatInit("s2", {}, {same_scale ? 0.03f : 0.04f});
        ZeroPoints(mb, "z", is_signed, 0, is_signed ? 0 : 131);
        mb.Node("QuantizeLinear", {"x", "s", "z"}, {"xq"});
        mb.Node("DequantizeLinear", {"xq", "s", "z"}, {"xd"});
        if (op == "Split") {
          // The second half, then joined float after its own Q/DQ pair.
          mb.Int64Init("sizes", {2}, {6, 10});
          ModelBuilder::IntAttr(mb.Node("Split", {"xd", "sizes"}, {"a", "p"}, "moved"), "axis", 1);
        } else if (op == "Resize" || op == "ResizeLinear") {
          mb.FloatInit("scales", {4}, {1.f, 1.f, 2.f, 2.f});
          auto& r = mb.Node("Resize", {"xd", "", "scales"}, {"p"}, "moved");
          auto* m = r.add_attribute();
          m->set_name("mode");
          m->set_type(onnx::AttributeProto::STRING);
          m->set_s(op == "Resize" ? "nearest" : "linear");
        } else if (op == "Transpose") {
          ModelBuilder::IntsAttr(mb.Node("Transpose", {"xd"}, {"p"}, "moved"), "perm",
                                 {0, 2, 3, 1});
        } else if (op == "Reshape") {
          mb.Int64Init("shape", {3}, {0, 4, 256});
          mb.Node("Reshape", {"xd", "shape"}, {"p"}, "moved");
        } else if (op == "Flatten") {
          ModelBuilder::IntAttr(mb.Node("Flatten", {"xd"}, {"p"}, "moved"), "axis", 2);
        } else if (op == "Unsqueeze") {
          mb.Int64Init("axes", {1}, {1});
          mb.Node("Unsqueeze", {"xd", "axes"}, {"p"}, "moved");
        } else if (op == "Slice") {  // channels 2..11, every other column
          mb.Int64Init("starts", {2}, {2, 0});
          mb.Int64Init("ends", {2}, {12, 8});
          mb.Int64Init("axes", {2}, {1, 3});
          mb.Int64Init("steps", {2}, {1, 2});
          mb.Node("Slice", {"xd", "starts", "ends", "axes", "steps"}, {"p"}, "moved");
        } else {
          ModelBuilder::IntAttr(mb.Node("DepthToSpace", {"xd"}, {"p"}, "moved"), "blocksize", 2);
        }
        mb.Node("QuantizeLinear", {"p", "s2", "z"}, {"pq"}, "after");
        mb.Node("DequantizeLinear", {"pq", "s2", "z"}, {"pd"});
        mb.FloatInit("two", {}, {2.f});
        mb.Node("Mul", {"pd", "two"}, {"y"});
        RefAndFast r;
        RunRefAndFast(mb.Bytes(),
                      Tensor::FromVector<float>(Uniform(2 * 16 * 64, 31, -4.f, 4.f), {2, 16, 8, 8}),
                      &r);
        if (HasFatalFailure()) return;
        const std::string eight = is_signed ? "int8" : "uint8";
        const bool moved = op != "ResizeLinear";
        const size_t at = r.plan.find("'moved' -> ");
        ASSERT_NE(at, std::string::npos) << r.plan;
        const std::string line = r.plan.substr(at, r.plan.find('\n', at) - at);
        EXPECT_EQ(line.find(" " + eight + "[") != std::string::npos, moved) << r.plan;
        EXPECT_EQ(r.plan.find("QuantizeLinear 'after'") == std::string::npos, moved && same_scale)
            << r.plan;
        ASSERT_EQ(r.got.numel(), r.want.numel());
        // Linear (float, oneDNN against the reference) may round a value one step apart.
        const float tol = moved ? 0.f : 2.f * (same_scale ? 0.03f : 0.04f) + 1e-5f;
        for (int64_t i = 0; i < r.want.numel(); ++i)
          ASSERT_LE(std::fabs(r.got.data<float>()[i] - r.want.data<float>()[i]), tol)
              << "[" << i << "]";
      }
}

// A DequantizeLinear whose value a Shape and a QuantizeLinear of the same scale read (PyTorch's
// ShuffleNet: the channel shuffle's Reshape target comes from Shape of the Concat): the
// QuantizeLinear goes (its readers read the 8-bit values), and with the Shape folded into a
// constant at planning the DequantizeLinear step is dropped too. Exactly the reference's result.
TEST(QdqRequantize, DropsAQuantizeOfTheSameScaleAndTheUnreadDequantize) {
  for (bool same_scale : {true, false}) {
    SCOPED_TRACE(same_scale ? "one scale" : "two scales");
    ModelBuilder mb(13);
    mb.Input("x", kF32, {2, 16, 8, 8}).OutputAnyShape("y", kF32);
    mb.FloatInit("s", {}, {0.03f});
    mb.FloatInit("s2", {}, {same_scale ? 0.03f : 0.04f});
    ZeroPoints(mb, "z", false, 0, 131);
    mb.Int64Init("zero", {}, {0});
    mb.Int64Init("axes", {1}, {0});
    mb.Int64Init("rest", {2}, {16, 64});
    mb.Node("QuantizeLinear", {"x", "s", "z"}, {"xq"});
    mb.Node("DequantizeLinear", {"xq", "s", "z"}, {"xd"}, "dq");
    mb.Node("Shape", {"xd"}, {"shape"});
    mb.Node("Gather", {"shape", "zero"}, {"batch"});
    mb.Node("Unsqueeze", {"batch", "axes"}, {"batch1"});
    ModelBuilder::IntAttr(mb.Node("Concat", {"batch1", "rest"}, {"target"}), "axis", 0);
    mb.Node("QuantizeLinear", {"xd", "s2", "z"}, {"pq"}, "again");
    mb.Node("DequantizeLinear", {"pq", "s2", "z"}, {"pd"});
    mb.Node("Reshape", {"pd", "target"}, {"r"}, "moved");
    mb.FloatInit("two", {}, {2.f});
    mb.Node("Mul", {"r", "two"}, {"y"});
    RefAndFast r;
    RunRefAndFast(mb.Bytes(),
                  Tensor::FromVector<float>(Uniform(2 * 16 * 64, 33, -4.f, 4.f), {2, 16, 8, 8}),
                  &r);
    if (HasFatalFailure()) return;
    EXPECT_EQ(r.plan.find("QuantizeLinear 'again'") == std::string::npos, same_scale) << r.plan;
    EXPECT_EQ(r.plan.find("DequantizeLinear 'dq'") == std::string::npos, same_scale) << r.plan;
    EXPECT_EQ(r.plan.find("unread steps dropped") != std::string::npos, same_scale) << r.plan;
    ASSERT_EQ(r.got.numel(), r.want.numel());
    for (int64_t i = 0; i < r.want.numel(); ++i)
      ASSERT_EQ(r.got.data<float>()[i], r.want.data<float>()[i]) << "[" << i << "]";
  }
}

// NNCF's form: DequantizeLinear -> MaxPool -> Conv with no QuantizeLinear after the MaxPool (it
// is on the grid already). The DequantizeLinear moves after the MaxPool, which then pools the
// 8-bit values, and the convolution sees a dequantized input: an int8 QConv.
TEST(QdqMaxPool, MovesTheDequantizeAfterItSoTheConvolutionBecomesInt8) {
  ModelBuilder mb(13);
  mb.Input("x", kF32, {2, 8, 9, 9}).OutputAnyShape("y", kF32);
  mb.FloatInit("s", {}, {0.03f});
  ZeroPoints(mb, "z", false, 0, 0);
  std::mt19937 rng(3);
  Int8Init(mb, "wq", {8, 8, 3, 3}, [&](int64_t) { return 2 * static_cast<int>(rng() % 63) - 62; });
  mb.FloatInit("sw", {}, {0.004f});
  mb.Node("QuantizeLinear", {"x", "s", "z"}, {"xq"});
  mb.Node("DequantizeLinear", {"xq", "s", "z"}, {"xd"});
  auto& pool = mb.Node("MaxPool", {"xd"}, {"p"});
  ModelBuilder::IntsAttr(pool, "kernel_shape", {2, 2});
  mb.Node("DequantizeLinear", {"wq", "sw"}, {"wd"});
  ModelBuilder::IntsAttr(mb.Node("Conv", {"p", "wd"}, {"c"}), "pads", {1, 1, 1, 1});
  mb.Node("Relu", {"c"}, {"y"});
  RefAndFast r;
  RunRefAndFast(mb.Bytes(),
                Tensor::FromVector<float>(Uniform(2 * 8 * 81, 13, -1.f, 3.f), {2, 8, 9, 9}), &r);
  if (HasFatalFailure()) return;
  EXPECT_NE(r.plan.find("cpu.maxpool.onednn uint8"), std::string::npos) << r.plan;
  EXPECT_NE(r.plan.find("cpu.qconv.onednn"), std::string::npos) << r.plan;
  EXPECT_EQ(r.plan.find("DequantizeLinear '"), std::string::npos) << r.plan;
  ExpectCloseOrOneStep(r, false, [](int64_t) { return 0.f; });
}

// A hand-written kiln.QAdd that breaks its rules: named in the error, at load or at the first
// run (shapes are checked when a plan is made), never a crash.
TEST(QAddOp, MalformedNodeIsRefusedWithItsRule) {
  struct Bad {
    const char* what;
    Shape b;
    int a_type;
    const char* activation;
    bool drop_y_zero;
    const char* want;
  };
  const Bad cases[] = {
      {"float A", {1, 4, 3, 3}, kF32, "", false, "A must be uint8 or int8"},
      {"shapes differ",
       {1, 4, 3, 1},
       onnx::TensorProto::UINT8,
       "",
       false,
       "A and B must have one shape"},
      {"activation",
       {1, 4, 3, 3},
       onnx::TensorProto::UINT8,
       "Sigmoid",
       false,
       "QAdd's activation must be \"\" or \"Relu\""},
      {"7 inputs", {1, 4, 3, 3}, onnx::TensorProto::UINT8, "", true, "QAdd takes 8 inputs"},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.what);
    ModelBuilder mb(13);
    auto* kiln = mb.proto().add_opset_import();
    kiln->set_domain("kiln");
    kiln->set_version(1);
    mb.Input("a", c.a_type, {1, 4, 3, 3}).OutputAnyShape("y", onnx::TensorProto::UINT8);
    mb.Input("b", onnx::TensorProto::UINT8, c.b);
    mb.FloatInit("s", {}, {0.1f});
    ZeroPoints(mb, "z", false, 0, 3);
    std::vector<std::string> ins = {"a", "s", "z", "b", "s", "z", "s", "z"};
    if (c.drop_y_zero) ins.pop_back();
    auto& n = mb.Node("QAdd", ins, {"y"}, "qa", "kiln");
    if (*c.activation) ModelBuilder::StringAttr(n, "activation", c.activation);
    auto s = Session::LoadFromBytes(mb.Bytes(), SessionOptions{});
    std::string msg = s.status().ToString();
    if (s.ok()) {
      std::vector<NamedTensor> out;
      Tensor a = c.a_type == kF32 ? Tensor::FromVector<float>(Uniform(36, 1), {1, 4, 3, 3})
                                  : Tensor::Empty(DataType::kUInt8, {1, 4, 3, 3});
      Status r = (*s)->Run({{"a", a}, {"b", Tensor::Empty(DataType::kUInt8, c.b)}}, &out);
      ASSERT_FALSE(r.ok());
      msg = r.ToString();
    }
    EXPECT_NE(msg.find("qa"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.want), std::string::npos) << msg;
  }
}

// QOperator models (ONNX Runtime's quantize_static with QuantFormat.QOperator): QLinearConv,
// QLinearMatMul and the com.microsoft QLinear* operators. The optimizer expands each into
// DequantizeLinear -> float op -> QuantizeLinear (expand_qlinear), after which the QDQ fusions
// and fast kernels run it; the reference is the graph as written on the operators' own reference
// kernels (QLinearConv's integer arithmetic, ms_qlinear.cc's dequantize-compute-quantize). Every
// value equal but for values one output step off (a rounding tie), at most 0.5 % of them.
struct QOperatorCase {
  std::string op;     // the quantized operator
  std::string fused;  // a kernel the fast plan must contain ("" for none in particular)
  Shape x;
};

void PrintTo(const QOperatorCase& c, std::ostream* os) { *os << c.op; }

void Int32Init(ModelBuilder& mb, const std::string& name, const Shape& dims,
               const std::function<int32_t(int64_t)>& value) {
  auto* t = mb.proto().mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT32);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t i = 0; i < NumElements(dims); ++i) t->add_int32_data(value(i));
}

class QOperatorTest : public ::testing::TestWithParam<QOperatorCase> {};

TEST_P(QOperatorTest, ExpandedMatchesTheOperatorsReference) {
  const QOperatorCase& c = GetParam();
  ModelBuilder mb(13);
  mb.ImportDomain("com.microsoft", 1);
  mb.Input("x", kF32, c.x).OutputAnyShape("y", kF32);
  // Two uint8 views of x (scales 0.03 and 0.045, zero points 120 and 128), as ONNX Runtime's
  // asymmetric activations are; the output's scale 0.0517 (not a simple ratio of theirs, which
  // would put many averages exactly on a rounding tie), zero point 110.
  mb.FloatInit("sa", {}, {0.03f});
  mb.FloatInit("sb", {}, {0.045f});
  mb.FloatInit("sy", {}, {0.0517f});
  ZeroPoints(mb, "za", false, 0, 120);
  ZeroPoints(mb, "zb", false, 0, 128);
  ZeroPoints(mb, "zy", false, 0, 110);
  mb.Node("QuantizeLinear", {"x", "sa", "za"}, {"a"});
  mb.Node("QuantizeLinear", {"x", "sb", "zb"}, {"b"});
  const int64_t ch = c.x[1];
  const std::string ms = "com.microsoft";
  std::mt19937 rng(11);
  auto even = [&](int64_t) { return 2 * static_cast<int>(rng() % 127) - 126; };
  bool quantized = true;
  if (c.op == "QLinearConv") {
    const int64_t m = 16;
    Int8Init(mb, "w", {m, ch, 3, 3}, even);
    std::vector<float> sw;
    for (int64_t i = 0; i < m; ++i) sw.push_back(0.002f + 0.0003f * static_cast<float>(i));
    mb.FloatInit("sw", {m}, sw);
    ZeroPoints(mb, "zw", true, m, 0);
    Int32Init(mb, "bias", {m}, [](int64_t i) { return static_cast<int32_t>(i * 300 - 2000); });
    auto& n = mb.Node("QLinearConv", {"a", "sa", "za", "w", "sw", "zw", "sy", "zy", "bias"}, {"yq"},
                      "op");
    ModelBuilder::IntsAttr(n, "pads", {1, 1, 1, 1});
  } else if (c.op == "QLinearMatMul") {
    Int8Init(mb, "w", {c.x.back(), 24}, even);
    mb.FloatInit("sw", {}, {0.004f});
    ZeroPoints(mb, "zw", true, 0, 0);
    mb.Node("QLinearMatMul", {"a", "sa", "za", "w", "sw", "zw", "sy", "zy"}, {"yq"}, "op");
  } else if (c.op == "QLinearAdd" || c.op == "QLinearMul") {
    mb.Node(c.op, {"a", "sa", "za", "b", "sb", "zb", "sy", "zy"}, {"yq"}, "op", ms);
  } else if (c.op == "QLinearAdd-broadcast") {  // a constant per channel: stays float
    auto* t = mb.proto().mutable_graph()->add_initializer();
    t->set_name("k");
    t->set_data_type(onnx::TensorProto::UINT8);
    for (int64_t d : {int64_t{1}, ch, int64_t{1}, int64_t{1}}) t->add_dims(d);
    std::string raw;
    for (int64_t i = 0; i < ch; ++i) raw.push_back(static_cast<char>(100 + 7 * i));
    t->set_raw_data(raw);
    mb.Node("QLinearAdd", {"a", "sa", "za", "k", "sb", "zb", "sy", "zy"}, {"yq"}, "op", ms);
  } else if (c.op == "QLinearConcat") {
    ModelBuilder::IntAttr(
        mb.Node(c.op, {"sy", "zy", "a", "sa", "za", "b", "sb", "zb"}, {"yq"}, "op", ms), "axis", 1);
  } else if (c.op == "QGemm" || c.op == "QGemm-float") {
    // Gemm(A', B'^T) * 2 + C' * 2, B per column (transB: one scale per row of B).
    const int64_t n = 12;
    Int8Init(mb, "w", {n, c.x.back()}, even);
    std::vector<float> sw;
    for (int64_t i = 0; i < n; ++i) sw.push_back(0.003f + 0.0002f * static_cast<float>(i));
    mb.FloatInit("sw", {n}, sw);
    ZeroPoints(mb, "zw", true, n, 0);
    Int32Init(mb, "bias", {n}, [](int64_t i) { return static_cast<int32_t>(i * 150 - 900); });
    std::vector<std::string> in = {"a", "sa", "za", "w", "sw", "zw", "bias"};
    quantized = c.op == "QGemm";
    if (quantized) in.insert(in.end(), {"sy", "zy"});
    auto& g = mb.Node("QGemm", in, {quantized ? "yq" : "y"}, "op", ms);
    ModelBuilder::IntAttr(g, "transB", 1);
    ModelBuilder::FloatAttr(g, "alpha", 2.f);
  } else if (c.op == "QLinearSigmoid-no-output-zero-point") {  // uint8 with zero point 0
    mb.Node("QLinearSigmoid", {"a", "sa", "za", "sy"}, {"yq"}, "op", ms);
  } else {  // the unary ones
    auto& n = mb.Node(c.op, {"a", "sa", "za", "sy", "zy"}, {"yq"}, "op", ms);
    if (c.op == "QLinearLeakyRelu") ModelBuilder::FloatAttr(n, "alpha", 0.1f);
    if (c.op == "QLinearAveragePool") {
      ModelBuilder::IntsAttr(n, "kernel_shape", {3, 3});
      ModelBuilder::IntsAttr(n, "strides", {2, 2});
      ModelBuilder::IntsAttr(n, "pads", {1, 1, 1, 1});
    }
  }
  if (quantized) {
    const bool zero = c.op.find("no-output-zero-point") == std::string::npos;
    mb.Node(
        "DequantizeLinear",
        zero ? std::vector<std::string>{"yq", "sy", "zy"} : std::vector<std::string>{"yq", "sy"},
        {"y"});
  }
  RefAndFast r;
  RunRefAndFast(mb.Bytes(),
                Tensor::FromVector<float>(Uniform(NumElements(c.x), 21, -3.f, 3.f), c.x), &r);
  if (HasFatalFailure()) return;
  // Nothing is left on the quantized operators' reference kernels.
  EXPECT_EQ(r.plan.find("\n  QLinear"), std::string::npos) << r.plan;
  EXPECT_EQ(r.plan.find("\n  QGemm"), std::string::npos) << r.plan;
  if (!c.fused.empty()) {
    EXPECT_NE(r.plan.find(c.fused), std::string::npos) << r.plan;
  }
  ExpectCloseOrOneStep(r, quantized, [](int64_t) { return 0.0517f; });
}

INSTANTIATE_TEST_SUITE_P(
    Operators, QOperatorTest,
    ::testing::Values(QOperatorCase{"QLinearConv", "cpu.qconv.onednn", {2, 8, 9, 9}},
                      QOperatorCase{"QLinearMatMul", "cpu.qmatmul.onednn", {6, 32}},
                      QOperatorCase{"QLinearAdd", "cpu.qadd.loop", {2, 8, 5, 5}},
                      QOperatorCase{"QLinearAdd-broadcast", "", {2, 8, 5, 5}},
                      QOperatorCase{"QLinearMul", "", {2, 8, 5, 5}},
                      QOperatorCase{
                          "QLinearGlobalAveragePool", "cpu.qaveragepool.onednn", {2, 8, 5, 5}},
                      QOperatorCase{"QLinearAveragePool", "cpu.qaveragepool.onednn", {2, 8, 9, 9}},
                      QOperatorCase{"QLinearSigmoid", "", {2, 8, 5, 5}},
                      QOperatorCase{"QLinearSigmoid-no-output-zero-point", "", {2, 8, 5, 5}},
                      QOperatorCase{"QLinearLeakyRelu", "", {2, 8, 5, 5}},
                      QOperatorCase{"QLinearConcat", "", {2, 8, 5, 5}},
                      QOperatorCase{"QGemm", "cpu.qmatmul.onednn", {5, 32}},
                      QOperatorCase{"QGemm-float", "cpu.qmatmul.onednn", {5, 32}}),
    [](const ::testing::TestParamInfo<QOperatorCase>& i) {
      std::string n = i.param.op;
      for (char& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });

// Malformed com.microsoft quantized operators are refused at load with the node and the rule.
TEST(QOperatorOp, MalformedNodesAreRefusedWithTheirRule) {
  struct Case {
    std::string what, want;
  };
  // Too few inputs: the loader's check of required inputs (ONNX Runtime's schema) refuses it.
  for (const Case& c : {Case{"too few inputs", "needs 7 input(s); input 5 is missing"},
                        Case{"float A", "input 0 must be uint8 or int8"},
                        Case{"y_zero_point without y_scale", "y_zero_point without y_scale"},
                        Case{"concat inputs", "(X, x_scale, x_zero_point) per input; got 6"}}) {
    SCOPED_TRACE(c.what);
    ModelBuilder mb(13);
    mb.ImportDomain("com.microsoft", 1);
    const bool float_a = c.what == "float A";
    mb.Input("x", float_a ? kF32 : onnx::TensorProto::UINT8, {1, 4})
        .OutputAnyShape("y", onnx::TensorProto::UINT8);
    mb.FloatInit("s", {}, {0.1f});
    ZeroPoints(mb, "z", false, 0, 3);
    const std::string ms = "com.microsoft";
    if (c.what == "too few inputs") {
      mb.Node("QLinearAdd", {"x", "s", "z", "x", "s"}, {"y"}, "bad", ms);
    } else if (float_a) {
      mb.Node("QLinearAdd", {"x", "s", "z", "x", "s", "z", "s", "z"}, {"y"}, "bad", ms);
    } else if (c.what == "concat inputs") {
      mb.Node("QLinearConcat", {"s", "z", "x", "s", "z", "x"}, {"y"}, "bad", ms);
    } else {
      Int8Init(mb, "w", {4, 4}, [](int64_t i) { return static_cast<int>(i); });
      mb.Node("QGemm", {"x", "s", "z", "w", "s", "z", "", "", "z"}, {"y"}, "bad", ms);
    }
    // Arity and attributes are checked at load; types when shapes are inferred, at the first run.
    auto s = Session::LoadFromBytes(mb.Bytes(), SessionOptions{});
    Status st = s.ok() ? Status() : s.status();
    if (s.ok()) {
      ASSERT_TRUE(float_a) << "loaded";
      std::vector<NamedTensor> out;
      st = (*s)->Run({{"x", Tensor::FromVector<float>({1, 2, 3, 4}, {1, 4})}}, &out);
      ASSERT_FALSE(st.ok());
    }
    EXPECT_NE(st.message().find("'bad'"), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find(c.want), std::string::npos) << st.ToString();
  }
}

// A com.microsoft quantized operator kiln cannot take says what and why at load.
TEST(QOperatorOp, ChannelsLastIsRefusedWithItsReason) {
  ModelBuilder mb(13);
  mb.ImportDomain("com.microsoft", 1);
  mb.Input("x", onnx::TensorProto::UINT8, {1, 4, 3, 3})
      .OutputAnyShape("y", onnx::TensorProto::UINT8);
  mb.FloatInit("s", {}, {0.1f});
  ZeroPoints(mb, "z", false, 0, 3);
  ModelBuilder::IntAttr(
      mb.Node("QLinearGlobalAveragePool", {"x", "s", "z", "s", "z"}, {"y"}, "gap", "com.microsoft"),
      "channels_last", 1);
  auto s = Session::LoadFromBytes(mb.Bytes(), SessionOptions{});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnsupported) << s.status().ToString();
  EXPECT_NE(s.status().message().find("'gap'"), std::string::npos) << s.status().ToString();
  EXPECT_NE(s.status().message().find("channels_last"), std::string::npos) << s.status().ToString();
}

}  // namespace
}  // namespace kiln
