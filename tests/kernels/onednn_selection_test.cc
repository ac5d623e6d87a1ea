// Which CPU kernel a plan selects: ConvTranspose and Resize where oneDNN cannot compute what ONNX
// defines (fallbacks and separable passes), the small-tensor loops against oneDNN above their
// limit, KILN_DISABLE_KERNELS, and recurrent layers refusing bad input on both kernels. Also two
// single-kernel edges the ops' own cases (KILN_REGISTER_OP_CASES) do not reach yet: GridSample
// channels-last with 64 taps (5-D cubic, 260 channels) and Cast to float16 past its range.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "onednn_test_util.h"

namespace kiln {
namespace {

using namespace onednn_test;  // NOLINT(build/namespaces): test helpers

// ConvTranspose that oneDNN cannot express (output_padding beyond the end pad, an output_shape
// beyond the natural size) falls back to the reference kernel in the plan. (What it can express,
// cpu.convtranspose.onednn runs on ConvTranspose's op cases.)
TEST(OneDnnKernelTest, ConvTransposeDeclinesWhatOneDnnCannotExpress) {
  struct Case {
    Shape x, w;
    std::vector<int64_t> strides, pads, dilations, output_padding, output_shape;
    int64_t group;
    bool bias;
    std::string auto_pad, kernel;
  };
  const std::string ref = "cpu.convtranspose.ref";
  const Case cases[] = {
      {{1, 4, 5, 5}, {4, 3, 3, 3}, {2, 2}, {0, 0, 0, 0}, {}, {1, 1}, {}, 1, true, "", ref},
      {{1, 4, 5, 5}, {4, 2, 3, 3}, {2, 2}, {}, {}, {}, {13, 12}, 1, true, "", ref},
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

}  // namespace
}  // namespace kiln
