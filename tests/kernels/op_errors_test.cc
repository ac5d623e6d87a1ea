// Bad input to the ops issue 42 added gives a Status naming the rule and the value (never a
// crash): invalid attributes at creation, wrong shapes at inference, out-of-range values at run
// time; and an unknown precision name. Each case runs through ops::RunCaseOnReference, the path
// a session takes (create, infer, compute).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "kiln/options.h"
#include "ops/op_cases.h"

namespace kiln {
namespace {

using ops::CaseInt64s;
using ops::CaseTensor;
using ops::OpCase;

void ExpectError(const std::string& op, const OpCase& c, const std::string& words) {
  Status s = ops::RunCaseOnReference("", op, c);
  ASSERT_FALSE(s.ok()) << op << ": " << c.name;
  EXPECT_NE(s.ToString().find(words), std::string::npos) << s.ToString();
}

TEST(OpErrors, AttributesAreValidatedAtCreation) {
  ExpectError("Trilu", OpCase("upper 2", 14).In(CaseTensor({3, 3}, 1)).Int("upper", 2),
              "upper must be 0 or 1; got 2");
  ExpectError("Mod",
              OpCase("fmod 3", 13).In(CaseTensor({3}, 1)).In(CaseTensor({3}, 2)).Int("fmod", 3),
              "fmod must be 0 or 1; got 3");
  ExpectError(
      "CumSum",
      OpCase("exclusive 2", 14).In(CaseTensor({3}, 1)).Const(CaseInt64s({0})).Int("exclusive", 2),
      "must be 0 or 1; got 2");
  ExpectError("ScatterElements",
              OpCase("reduction sub", 18)
                  .In(CaseTensor({4}, 1))
                  .In(CaseInt64s({1}))
                  .In(CaseTensor({1}, 2))
                  .Str("reduction", "sub"),
              "sub");
}

TEST(OpErrors, ShapesAreCheckedAtInference) {
  ExpectError("Trilu", OpCase("rank 1", 14).In(CaseTensor({5}, 1)), "rank >= 2; got rank 1");
  ExpectError("GatherElements",
              OpCase("rank mismatch", 13).In(CaseTensor({3, 4}, 1)).In(CaseInt64s({0, 1})),
              "indices must have data's rank 2; got rank 1");
  ExpectError("GatherElements",
              OpCase("axis 2", 13)
                  .In(CaseTensor({3, 4}, 1))
                  .In(Tensor::FromVector<int64_t>({0, 1}, {1, 2}))
                  .Int("axis", 2),
              "axis must be in [-2, 2); got 2");
  ExpectError("Mod", OpCase("float fmod 0", 13).In(CaseTensor({3}, 1)).In(CaseTensor({3}, 2)),
              "fmod must be 1 for floating-point inputs; got 0");
  ExpectError("OneHot",
              OpCase("negative depth", 11)
                  .In(CaseInt64s({0, 1}))
                  .Const(CaseInt64s({-3}))
                  .In(ops::CaseFloats({0.f, 1.f}, {2})),
              "depth must be >= 0; got -3");
}

TEST(OpErrors, ValuesAreCheckedAtRunTime) {
  ExpectError("GatherElements", OpCase("index 7", 13).In(CaseTensor({3}, 1)).In(CaseInt64s({0, 7})),
              "indices must be in [-3, 3) for axis 0; got 7");
  ExpectError(
      "ScatterElements",
      OpCase("index -9", 13).In(CaseTensor({4}, 1)).In(CaseInt64s({-9})).In(CaseTensor({1}, 2)),
      "got -9");
  ExpectError("Mod", OpCase("divide by zero", 13).In(CaseInt64s({5, 6})).In(CaseInt64s({2, 0})),
              "integer divisors must be nonzero; got 0");
}

TEST(OpErrors, UnknownPrecisionNamesTheChoices) {
  auto p = ParsePrecision("fp64");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "precision must be fp32, bf16 or fp16; got 'fp64'");
  for (Precision q : {Precision::kFp32, Precision::kBf16, Precision::kFp16})
    EXPECT_EQ(*ParsePrecision(PrecisionName(q)), q);
}

// The second batch of issue 42 (pools, normalizations, Einsum, tensor and signal ops).
TEST(OpErrors, SecondBatchNamesTheRuleAndValue) {
  ExpectError("LpPool",
              OpCase("p 0", 18).In(CaseTensor({1, 1, 4}, 1)).Ints("kernel_shape", {2}).Int("p", 0),
              "p must be > 0; got 0");
  ExpectError("LpNormalization", OpCase("p 3", 22).In(CaseTensor({2, 3}, 1)).Int("p", 3),
              "p must be 1 or 2; got 3");
  ExpectError("Einsum", OpCase("bad term", 12).In(CaseTensor({2}, 1)).Str("equation", "i1->i"),
              "a term holds letters and at most one '...'; got 'i1'");
  ExpectError("Einsum",
              OpCase("sizes", 12)
                  .In(CaseTensor({2, 3}, 1))
                  .In(CaseTensor({4}, 2))
                  .Str("equation", "ij,j->i"),
              "label 'j' has sizes 3 and 4");
  ExpectError("CenterCropPad",
              OpCase("shape length", 18).In(CaseTensor({4, 5}, 1)).Const(CaseInt64s({3})),
              "shape must have one entry per axis (2); got [3]");
  ExpectError("DFT", OpCase("complex axis", 17).In(CaseTensor({2, 5, 1}, 1)).Int("axis", 2),
              "(not the complex dim); got 2");
  ExpectError("Det", OpCase("not square", 11).In(CaseTensor({2, 3}, 1)),
              "square matrices); got [2,3]");
  ExpectError("Unique", OpCase("sorted 2", 11).In(CaseTensor({3}, 1)).Int("sorted", 2),
              "sorted must be 0 or 1; got 2");
  ExpectError("ReverseSequence",
              OpCase("length 5 of 4", 10).In(CaseTensor({4, 2}, 1)).In(CaseInt64s({1, 5})),
              "sequence_lens must be in [0, 4]; got 5 for batch entry 1");
  ExpectError("MaxUnpool",
              OpCase("index 9", 11)
                  .In(CaseTensor({1, 1, 2}, 1))
                  .In(Tensor::FromVector<int64_t>({0, 9}, {1, 1, 2}))
                  .Ints("kernel_shape", {2})
                  .Ints("strides", {2}),
              "values in [0, 4)); got 9 at element 1");
}

// This session's Cast, quantization, TensorScatter, TfIdfVectorizer and optimizer attributes.
TEST(OpErrors, CastQuantizeAndNewOpsNameTheRuleAndValue) {
  ExpectError("Cast",
              OpCase("saturate 2", 19).In(CaseTensor({3}, 1)).Int("to", 17).Int("saturate", 2),
              "saturate must be 0 or 1; got 2");
  ExpectError(
      "Cast",
      OpCase("round_mode", 24).In(CaseTensor({3}, 1)).Int("to", 24).Str("round_mode", "odd"),
      "round_mode must be 'up', 'down' or 'nearest'; got 'odd'");
  ExpectError("QuantizeLinear",
              OpCase("blocked scale shape", 21)
                  .In(CaseTensor({3, 4}, 1))
                  .Const(CaseTensor({3, 3}, 2, 0.1f, 0.2f))
                  .Int("axis", 1)
                  .Int("block_size", 2),
              "with that dim divided by the block size, rounded up; got [3,3]");
  ExpectError("TensorScatter",
              OpCase("linear overflow", 24)
                  .In(CaseTensor({1, 4, 2}, 1))
                  .In(CaseTensor({1, 2, 2}, 2))
                  .In(CaseInt64s({3}))
                  .Int("axis", 1),
              "outside the cache's 4 positions (mode linear)");
  ExpectError("TfIdfVectorizer",
              OpCase("mode", 9)
                  .In(CaseInt64s({1, 2}))
                  .Str("mode", "BM25")
                  .Int("min_gram_length", 1)
                  .Int("max_gram_length", 1)
                  .Ints("ngram_counts", {0})
                  .Ints("ngram_indexes", {0})
                  .Ints("pool_int64s", {1}),
              "mode must be TF, IDF or TFIDF; got 'BM25'");
}

// ImageDecoder (src/data/image_decoder_op.cc) on truncated and mutated bytes of its own cases'
// images (JPEG, PNG, PNM, BMP encoded in the case list): every run returns a Status, never
// crashes (the sanitizer suite runs this under ASan/UBSan); a cut below half the file always
// fails, with a message.
TEST(OpErrors, ImageDecoderRefusesCorruptBytes) {
  const std::vector<OpCase> cases = ops::CasesFor("", "ImageDecoder");
  ASSERT_FALSE(cases.empty());
  std::mt19937 rng(5);
  int runs = 0, refused = 0;
  for (const OpCase& base : cases) {
    const Tensor& bytes = base.inputs[0].value;
    const int64_t n = bytes.numel();
    ASSERT_GT(n, 8);
    for (int i = 0; i < 24; ++i) {
      OpCase c = base;
      const bool cut = i % 2 == 0;
      const int64_t keep = cut ? std::uniform_int_distribution<int64_t>(0, n / 2)(rng) : n;
      Tensor mutated = Tensor::Empty(DataType::kUInt8, {keep});
      if (keep > 0) std::memcpy(mutated.raw(), bytes.raw(), static_cast<size_t>(keep));
      if (!cut)
        mutated.data<uint8_t>()[std::uniform_int_distribution<int64_t>(0, n - 1)(rng)] ^=
            static_cast<uint8_t>(1 + rng() % 255);
      c.inputs[0].value = mutated;
      Status s = ops::RunCaseOnReference("", "ImageDecoder", c);
      ++runs;
      if (!s.ok()) {
        ++refused;
        EXPECT_FALSE(s.message().empty());
      }
      if (cut) {
        EXPECT_FALSE(s.ok()) << base.name << " cut to " << keep << " of " << n << " bytes";
      }
    }
  }
  EXPECT_GE(refused, runs / 2);
}

}  // namespace
}  // namespace kiln
