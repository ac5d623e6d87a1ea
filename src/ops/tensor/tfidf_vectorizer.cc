// TfIdfVectorizer (opset 9): counts the n-grams of a pool in each row of an int32/int64 input and
// weighs the counts (TF: the count; IDF: the pool weight where the count is positive, else 1/0;
// TFIDF: weight * count, or the count without weights). Output float32 [B, size] for a [B, C]
// input, [size] for [C], size = max(ngram_indexes) + 1.
//
// The pool: `ngram_counts[k]` is where the (k+1)-grams start in `pool_int64s`; n-grams of sizes
// outside [min_gram_length, max_gram_length] still take their ids. An n-gram is counted at
// ngram_indexes[its id] when it occurs as X[s], X[s + d], ..., X[s + (n-1) d] for a skip distance
// d in 1..max_skip_count + 1; unigrams only once (d = 1), and a start s is tried only while the
// shortest wanted n-gram fits in the row (ONNX's reference and ONNX Runtime count so).
// String pools (pool_strings) and string inputs are not supported (kiln has no string tensors).
#include <algorithm>
#include <map>
#include <vector>

#include "ops/common.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

enum class TfIdfMode { kTf, kIdf, kTfIdf };

struct TfIdfAttrs : ir::OpAttrs {
  TfIdfMode mode = TfIdfMode::kTf;
  int64_t min_gram = 1, max_gram = 1, max_skip = 0, output_size = 0;
  std::map<std::vector<int64_t>, int64_t> grams;  // n-gram -> output index
  std::vector<float> weights;
};

class TfIdfVectorizerOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    auto op = std::make_unique<TfIdfVectorizerOp>(node);
    TfIdfAttrs& a = op->a_;
    const std::string mode = node.GetString("mode", "");
    if (mode == "TF")
      a.mode = TfIdfMode::kTf;
    else if (mode == "IDF")
      a.mode = TfIdfMode::kIdf;
    else if (mode == "TFIDF")
      a.mode = TfIdfMode::kTfIdf;
    else
      return ir::AttrError(node, "mode must be TF, IDF or TFIDF; got '" + mode + "'");
    if (node.HasAttr("pool_strings"))
      return Unsupported("failed to load " + node.Describe() +
                         ": string pools are not supported (kiln has no string tensors)");
    a.min_gram = node.GetInt("min_gram_length", 0);
    a.max_gram = node.GetInt("max_gram_length", 0);
    a.max_skip = node.GetInt("max_skip_count", 0);
    if (a.min_gram < 1 || a.max_gram < a.min_gram || a.max_skip < 0)
      return ir::AttrError(node,
                           "needs 1 <= min_gram_length <= max_gram_length and "
                           "max_skip_count >= 0; got " +
                               std::to_string(a.min_gram) + ", " + std::to_string(a.max_gram) +
                               ", " + std::to_string(a.max_skip));
    const std::vector<int64_t> pool = node.GetInts("pool_int64s");
    const std::vector<int64_t> counts = node.GetInts("ngram_counts");
    const std::vector<int64_t> indexes = node.GetInts("ngram_indexes");
    a.weights = node.GetFloats("weights");
    if (indexes.empty()) return ir::AttrError(node, "ngram_indexes must not be empty");
    a.output_size = *std::max_element(indexes.begin(), indexes.end()) + 1;
    int64_t id = 0;
    for (size_t k = 0; k < counts.size(); ++k) {
      const int64_t n = static_cast<int64_t>(k) + 1;
      const int64_t begin = counts[k];
      const int64_t end = k + 1 < counts.size() ? counts[k + 1] : static_cast<int64_t>(pool.size());
      if (begin < 0 || end < begin || end > static_cast<int64_t>(pool.size()) ||
          (end - begin) % n != 0)
        return ir::AttrError(node,
                             "ngram_counts[" + std::to_string(k) + "] = " + std::to_string(begin) +
                                 " does not split pool_int64s (" + std::to_string(pool.size()) +
                                 " values) into " + std::to_string(n) + "-grams");
      for (int64_t p = begin; p < end; p += n, ++id) {
        if (id >= static_cast<int64_t>(indexes.size()))
          return ir::AttrError(node, "ngram_indexes has " + std::to_string(indexes.size()) +
                                         " entries, fewer than the pool's n-grams");
        if (indexes[id] < 0) return ir::AttrError(node, "ngram_indexes must be >= 0");
        if (n >= a.min_gram && n <= a.max_gram)
          a.grams[std::vector<int64_t>(pool.begin() + p, pool.begin() + p + n)] = indexes[id];
      }
    }
    if (!a.weights.empty() && static_cast<int64_t>(a.weights.size()) < a.output_size)
      return ir::AttrError(node, "weights must have " + std::to_string(a.output_size) +
                                     " entries; got " + std::to_string(a.weights.size()));
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  explicit TfIdfVectorizerOp(const ir::Node& node) : Op(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kInt32, DataType::kInt64}));
    if (ctx.rank(0) > 2)
      return ctx.Error("input must be [C] or [B, C]; got " + ShapeToString(ctx.shape(0)));
    ctx.SetOutput(
        0, DataType::kFloat,
        ctx.rank(0) == 2 ? Shape{ctx.shape(0)[0], a_.output_size} : Shape{a_.output_size});
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    const std::vector<int64_t> v = ReadInts(x);
    const int64_t rows = x.rank() == 2 ? x.shape()[0] : 1;
    const int64_t cols = x.rank() == 0 ? 1 : x.shape().back();
    float* y = ctx.out(0).data<float>();
    std::vector<int64_t> counts(static_cast<size_t>(a_.output_size));
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(counts.begin(), counts.end(), 0);
      CountRow(v.data() + r * cols, cols, &counts);
      for (int64_t o = 0; o < a_.output_size; ++o) y[r * a_.output_size + o] = Weigh(o, counts[o]);
    }
    return OkStatus();
  }
  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  void CountRow(const int64_t* row, int64_t cols, std::vector<int64_t>* counts) const {
    int64_t start_size = a_.min_gram;
    std::vector<int64_t> gram;
    for (int64_t d = 1; d <= a_.max_skip + 1; ++d) {
      for (int64_t s = 0; s < cols && s + d * (start_size - 1) < cols; ++s) {
        gram.clear();
        for (int64_t n = 1, p = s; n <= a_.max_gram && p < cols; ++n, p += d) {
          gram.push_back(row[p]);
          if (n < start_size) continue;
          auto it = a_.grams.find(gram);
          if (it != a_.grams.end()) ++(*counts)[it->second];
        }
      }
      if (start_size == 1 && ++start_size > a_.max_gram) break;  // unigrams once
    }
  }

  float Weigh(int64_t o, int64_t count) const {
    const bool w = !a_.weights.empty();
    switch (a_.mode) {
      case TfIdfMode::kTf:
        return static_cast<float>(count);
      case TfIdfMode::kIdf:
        return count > 0 ? (w ? a_.weights[o] : 1.f) : 0.f;
      case TfIdfMode::kTfIdf:
        return w ? a_.weights[o] * static_cast<float>(count) : static_cast<float>(count);
    }
    return 0.f;
  }

  TfIdfAttrs a_;
};
KILN_REGISTER_OP("TfIdfVectorizer", 9, ir::kMaxOpset, &TfIdfVectorizerOp::Create);

// Cases: unigrams and bigrams with skips, each mode, [C] and [B, C], int32 and int64.
std::vector<OpCase> TfIdfCases() {
  std::vector<OpCase> c;
  const std::vector<int64_t> pool = {2, 3, 5, 4, 5, 6, 7, 8, 6, 7};  // 4 unigrams, 3 bigrams
  for (const char* mode : {"TF", "IDF", "TFIDF"})
    for (int64_t skip : {0, 2})
      c.push_back(
          OpCase(std::string(mode) + " [2,7] int32 uni+bi skip " + std::to_string(skip), 9)
              .In(CaseInts(DataType::kInt32, {2, 7}, 71 + static_cast<uint32_t>(skip), 2, 8))
              .Str("mode", mode)
              .Int("min_gram_length", 1)
              .Int("max_gram_length", 2)
              .Int("max_skip_count", skip)
              .Ints("ngram_counts", {0, 4})
              .Ints("ngram_indexes", {0, 1, 2, 3, 4, 5, 6})
              .Ints("pool_int64s", pool)
              .Floats("weights", {1.f, 0.5f, 2.f, 0.25f, 3.f, 1.5f, 0.75f}));
  c.push_back(OpCase("TF [12] int64 bigrams only skip 5", 9)
                  .In(CaseInts(DataType::kInt64, {12}, 75, 2, 8))
                  .Str("mode", "TF")
                  .Int("min_gram_length", 2)
                  .Int("max_gram_length", 2)
                  .Int("max_skip_count", 5)
                  .Ints("ngram_counts", {0, 4})
                  .Ints("ngram_indexes", {0, 1, 2, 3, 4, 5, 6})
                  .Ints("pool_int64s", pool));
  return c;
}
KILN_REGISTER_OP_CASES("", "TfIdfVectorizer", &TfIdfCases);

}  // namespace
}  // namespace kiln::ops
