// Fusions the optimizer makes, run by oneDNN post-ops and kiln's Winograd kernel, against the
// unfused reference graph: Gelu into FusedMatMul, Conv -> Add -> activation chains, --tune's 1x1
// convolution as a matmul, residuals summed in place (and one that must not be), and the
// Winograd convolution's paths (edge tiles, residuals, activations, the shared chunks of
// transformed weights above 4 MB, more than 256 input channels).
#include <gtest/gtest.h>

#include <cstdlib>

#include "onednn_test_util.h"

namespace kiln {
namespace {

using namespace onednn_test;  // NOLINT(build/namespaces): test helpers

// Gelu-20 in both forms (gelu_erf / gelu_tanh) fused into FusedMatMul by the optimizer, against
// the unfused reference graph. (Standalone, cpu.gelu.onednn runs on Gelu's op cases.)
TEST(OneDnnKernelTest, GeluBothForms) {
  for (const char* approximate : {"none", "tanh"}) {
    SCOPED_TRACE(approximate);
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

}  // namespace
}  // namespace kiln
