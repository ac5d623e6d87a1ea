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

// TreeEnsemble (ai.onnx.ml opset 5, src/ops/ml/tree_ensemble.cc): its first registered case with
// one attribute broken at a time; each is refused naming the attribute and value.
TEST(OpErrors, TreeEnsembleAttributesNameTheRuleAndValue) {
  const std::vector<OpCase> cases = ops::CasesFor("ai.onnx.ml", "TreeEnsemble");
  ASSERT_FALSE(cases.empty());
  ASSERT_TRUE(ops::RunCaseOnReference("ai.onnx.ml", "TreeEnsemble", cases[0]).ok());
  auto expect = [](const OpCase& c, const std::string& words) {
    Status s = ops::RunCaseOnReference("ai.onnx.ml", "TreeEnsemble", c);
    ASSERT_FALSE(s.ok()) << c.name;
    EXPECT_NE(s.ToString().find(words), std::string::npos) << s.ToString();
  };
  auto with = [&](auto edit) {
    OpCase c = cases[0];
    edit(c);
    return c;
  };
  expect(with([](OpCase& c) { c.Int("post_transform", 2); }),
         "post_transform must be 0 (NONE) in opset 5; got 2");
  expect(with([](OpCase& c) { c.Int("aggregate_function", 4); }),
         "aggregate_function must be 0 (AVERAGE), 1 (SUM), 2 (MIN) or 3 (MAX); got 4");
  expect(with([](OpCase& c) { c.Int("n_targets", 2); }),
         "leaf_targetids[4] must be in [0, 2) (n_targets); got 2");
  expect(with([](OpCase& c) {
           c.Ints("leaf_targetids", {0, 1});
         }),
         "leaf_targetids must have one entry per leaf (10, leaf_weights' size); got 2");
  expect(with([](OpCase& c) {
           c.Ints("nodes_truenodeids", {1, 0, 2, 3, 5, 6, 7, 10});
         }),
         "nodes_truenodeids[7] must be in [0, 10) (a leaf); got 10");
  expect(with([](OpCase& c) {
           c.Ints("nodes_falseleafs", {0, 1, 0, 1, 0, 0, 1});
         }),
         "nodes_falseleafs must have one entry per node (8, nodes_featureids' length); got 7");
  expect(with([](OpCase& c) {
           c.Ints("tree_roots", {0, 8});
         }),
         "tree_roots[1] must be in [0, 8) (a node); got 8");
  expect(with([](OpCase& c) {
           c.Ints("nodes_truenodeids", {1, 0, 2, 2, 5, 6, 7, 9});
           c.Ints("nodes_trueleafs", {0, 1, 1, 0, 1, 1, 1, 1});
         }),
         "nodes_truenodeids[3] must not lead back to node 2");
  expect(with([](OpCase& c) {
           c.attrs["nodes_modes"].t = Tensor::FromVector<uint8_t>({0, 6, 3, 5, 1, 9, 4, 0}, {8});
         }),
         "nodes_modes[5] must be in [0, 6] (BRANCH_LEQ .. BRANCH_MEMBER); got 9");
  expect(with([](OpCase& c) { c.attrs.erase("membership_values"); }),
         "node 1 has none (membership_values is absent)");
  expect(with([](OpCase& c) {
           c.attrs["membership_values"].t =
               ops::CaseFloats({5.f, 1.f, 2.f, std::numeric_limits<float>::quiet_NaN(), 7.f}, {5});
         }),
         "got 1 values past the last set");
  expect(with([](OpCase& c) {
           c.attrs["nodes_splits"].t = CaseInt64s({0, 1, 2, 3, 4, 5, 6, 7});
         }),
         "nodes_splits must be a float32, float64 or float16 tensor; got int64");
  expect(with([](OpCase& c) { c.attrs.erase("n_targets"); }), "n_targets is required");
  expect(with([](OpCase& c) {
           c.Ints("nodes_featureids", {0, 5, 1, 2, 1, 0, 2, 0});
         }),
         "nodes_featureids must be below X's 3 columns; got feature 5");
  expect(with([](OpCase& c) { c.inputs[0].value = CaseTensor({21}, 1); }),
         "X must have rank 2 ([N, F]); got shape [21]");
}

// The string ops (src/ops/text/) and Equal on strings: bad attributes, a bad regex, mismatched
// LabelEncoder tables, shapes that do not broadcast, non-string inputs.
TEST(OpErrors, StringOpsNameTheRuleAndValue) {
  auto strings = [](std::vector<std::string> v, Shape shape) {
    Tensor t = Tensor::Strings(std::move(shape));
    for (size_t i = 0; i < v.size(); ++i) t.data<std::string>()[i] = v[i];
    return t;
  };
  auto expect = [](const std::string& domain, const std::string& op, const OpCase& c,
                   const std::string& words) {
    Status s = ops::RunCaseOnReference(domain, op, c);
    ASSERT_FALSE(s.ok()) << op << ": " << c.name;
    EXPECT_NE(s.ToString().find(words), std::string::npos) << s.ToString();
  };
  expect("", "StringNormalizer",
         OpCase("action", 10).In(strings({"a"}, {1})).Str("case_change_action", "TITLE"),
         "case_change_action must be LOWER, UPPER or NONE; got 'TITLE'");
  expect("", "StringNormalizer", OpCase("rank 3", 10).In(strings({"a"}, {1, 1, 1})),
         "X must be [C] or [1, C]; got [1,1,1]");
  expect("", "StringSplit", OpCase("float X", 20).In(CaseTensor({2}, 1)).Outputs(2),
         "must be a string tensor; got float32");
  expect("", "RegexFullMatch",
         OpCase("bad regex", 20).In(strings({"a"}, {1})).Str("pattern", "a(b"),
         "got 'a(b': missing )");
  expect("", "StringConcat",
         OpCase("no broadcast", 20).In(strings({"a", "b"}, {2})).In(strings({"x", "y", "z"}, {3})),
         "[3]");
  expect("", "Equal",
         OpCase("strings at opset 13", 13).In(strings({"a"}, {1})).In(strings({"a"}, {1})),
         "got string");
  expect("", "Less", OpCase("strings", 19).In(strings({"a"}, {1})).In(strings({"a"}, {1})),
         "got string");
  OpCase counts("2 keys, 1 value", 2);
  counts.In(strings({"a"}, {1})).Ints("values_int64s", {1});
  counts.attrs["keys_strings"].type = ir::Attribute::Type::kStrings;
  counts.attrs["keys_strings"].strings = {"a", "b"};
  expect("ai.onnx.ml", "LabelEncoder", counts,
         "keys and values must have the same length; got 2 keys and 1 values");
  expect("ai.onnx.ml", "LabelEncoder",
         OpCase("two key lists", 2)
             .In(CaseInt64s({1}))
             .Ints("keys_int64s", {1})
             .Floats("keys_floats", {1.f})
             .Ints("values_int64s", {2}),
         "got keys_int64s, keys_floats");
  expect("ai.onnx.ml", "LabelEncoder",
         OpCase("X float, keys int64", 2)
             .In(CaseTensor({2}, 1))
             .Ints("keys_int64s", {1})
             .Ints("values_int64s", {2}),
         "X must have the keys' dtype int64; got float32");
}

// Sequence and optional ops (src/ops/sequence/): positions out of range, mismatched items and a
// none optional give a Status naming the rule and the value.
TEST(OpErrors, SequenceAndOptionalOpsNameTheRuleAndValue) {
  const Tensor three = Tensor::Sequence(
      DataType::kFloat, {CaseTensor({2, 3}, 1), CaseTensor({2, 4}, 2), CaseTensor({3, 3}, 3)});
  ExpectError("SequenceAt",
              OpCase("position 3", 11).In(three).In(Tensor::FromVector<int64_t>({3}, Shape{})),
              "position must be in [-3, 2] for a sequence of 3 items; got 3");
  ExpectError("SequenceInsert",
              OpCase("position -4", 11)
                  .In(three)
                  .In(CaseTensor({1}, 4))
                  .In(Tensor::FromVector<int64_t>({-4}, Shape{})),
              "position must be in [-3, 3] for a sequence of 3 items; got -4");
  ExpectError("SequenceErase", OpCase("empty", 11).In(Tensor::Sequence(DataType::kFloat, {})),
              "cannot erase from an empty sequence");
  ExpectError("ConcatFromSequence", OpCase("axis 1", 11).In(three).Int("axis", 1),
              "items must agree in all dims but axis 1; item 0 is float32[2,3], item 2 "
              "float32[3,3]");
  ExpectError("ConcatFromSequence",
              OpCase("new_axis", 11).In(three).Int("axis", 0).Int("new_axis", 1),
              "items must have one shape");
  ExpectError("ConcatFromSequence", OpCase("no axis", 11).In(three), "axis is required");
  ExpectError("SequenceConstruct",
              OpCase("mixed dtypes", 11).In(CaseTensor({2}, 5)).In(CaseInt64s({1})),
              "inputs must have one dtype; input 0 is float32, input 1 int64");
  ExpectError("OptionalGetElement",
              OpCase("none", 18).In(Tensor::Optional(DataType::kFloat, nullptr)),
              "the optional input is none");
  ExpectError("OptionalGetElement", OpCase("tensor at 15", 15).In(CaseTensor({2}, 6)),
              "input must be an optional (a tensor or sequence from opset 18)");
  ExpectError("Optional", OpCase("no input, no type", 15), "needs the `type` attribute");
  ExpectError("SplitToSequence",
              OpCase("split sum", 11).In(CaseTensor({5}, 7)).In(CaseInt64s({2, 2})),
              "split lengths must sum to the axis' dim 5; got [2,2]");
  ExpectError("SplitToSequence",
              OpCase("scalar split 0", 11)
                  .In(CaseTensor({5}, 7))
                  .In(Tensor::FromVector<int64_t>({0}, Shape{})),
              "a scalar split must be > 0; got 0");
  ExpectError("SequenceEmpty", OpCase("dtype 99", 11).Int("dtype", 99),
              "dtype must be a tensor data type; got 99");
}

// Cast from strings (src/ops/tensor/cast_string.cc): text that does not parse, or an integer
// past int64, is a run-time error naming the element and its text.
TEST(OpErrors, CastFromUnparsableStringsNamesTheElement) {
  auto texts = [](const std::vector<std::string>& v) {
    Tensor t = Tensor::Strings({static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.data<std::string>()[i] = v[i];
    return t;
  };
  ExpectError("Cast",
              OpCase("'abc' to float32", 13)
                  .In(texts({"1.5", "abc"}))
                  .Int("to", static_cast<int64_t>(DataType::kFloat)),
              "element 1 does not parse as float32; got 'abc'");
  ExpectError("Cast",
              OpCase("'1.5' to int64", 13)
                  .In(texts({"2", "-3", "1.5"}))
                  .Int("to", static_cast<int64_t>(DataType::kInt64)),
              "element 2 does not parse as int64; got '1.5'");
  ExpectError("Cast",
              OpCase("2^63 to int32", 13)
                  .In(texts({"9223372036854775808"}))
                  .Int("to", static_cast<int64_t>(DataType::kInt32)),
              "element 0 is out of range for int64; got '9223372036854775808'");
  ExpectError("CastLike",
              OpCase("'1__0' like float32", 15).In(texts({"1__0"})).In(CaseTensor({1}, 1)),
              "element 0 does not parse as float32; got '1__0'");
}

}  // namespace
}  // namespace kiln
