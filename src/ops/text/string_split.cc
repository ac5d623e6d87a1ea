// StringSplit (opset 20): splits each element of X (a string tensor of any shape) as Python's
// str.split(delimiter, maxsplit) does (ONNX's reference calls numpy.char.split).
//   delimiter set and not empty: split at each occurrence; consecutive delimiters delimit empty
//   strings; "" gives [""].
//   delimiter absent or "": split on runs of whitespace (Python's str.isspace, utf8.h), leading
//   and trailing whitespace dropped; "" and all-whitespace give no substring.
//   maxsplit (absent or negative: no limit): at most that many splits; the rest of the string
//   after the last split is the final substring (for whitespace splitting, with its leading
//   whitespace dropped and its trailing whitespace kept, as Python).
// Outputs: Y (string, X's shape + [M], M the largest count, shorter rows padded with ""; M = 0 for
// an empty X) and Z (int64, X's shape: each element's count). Y's last dim is known only by
// running (ShapesFromRun).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/text/text_common.h"
#include "ops/text/utf8.h"

namespace kiln::ops {
namespace {

struct StringSplitAttrs : ir::OpAttrs {
  std::string delimiter;  // "": split on whitespace
  int64_t maxsplit = -1;  // < 0: no limit
};

// The code point length at pos when it is whitespace, else 0.
size_t SpaceAt(const std::string& s, size_t pos) {
  char32_t cp = 0;
  bool valid = true;
  const size_t len = DecodeUtf8(s, pos, &cp, &valid);
  return valid && IsPythonSpace(cp) ? len : 0;
}

std::vector<std::string> SplitOnWhitespace(const std::string& s, int64_t maxsplit) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (true) {
    for (size_t n; pos < s.size() && (n = SpaceAt(s, pos)) > 0;) pos += n;
    if (pos >= s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      parts.push_back(s.substr(pos));  // the rest, trailing whitespace kept
      break;
    }
    const size_t start = pos;
    while (pos < s.size() && SpaceAt(s, pos) == 0) ++pos;
    parts.push_back(s.substr(start, pos - start));
  }
  return parts;
}

std::vector<std::string> SplitOnDelimiter(const std::string& s, const std::string& d,
                                          int64_t maxsplit) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    const size_t at = s.find(d, start);
    if (at == std::string::npos) break;
    parts.push_back(s.substr(start, at - start));
    start = at + d.size();
  }
  parts.push_back(s.substr(start));
  return parts;
}

class StringSplitOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    std::unique_ptr<StringSplitOp> op(new StringSplitOp(node));
    op->a_.delimiter = node.GetString("delimiter", "");
    op->a_.maxsplit = node.GetInt("maxsplit", -1);
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  bool ShapesFromRun() const override { return true; }
  bool TakesNonPlainValues() const override { return true; }
  // Not asked for shapes (ShapesFromRun): checks X and gives the outputs' dtypes and Z's shape.
  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kString}));
    ctx.SetOutput(0, DataType::kString, {});
    if (ctx.num_outputs() > 1) ctx.SetOutput(1, DataType::kInt64, ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectStringInput(*this, ctx, 0, "X"));
    const Tensor& x = ctx.in(0);
    const std::string* xp = x.data<std::string>();
    const int64_t n = x.numel();
    std::vector<std::vector<std::string>> parts(static_cast<size_t>(n));
    int64_t most = 0;
    for (int64_t i = 0; i < n; ++i) {
      parts[i] = a_.delimiter.empty() ? SplitOnWhitespace(xp[i], a_.maxsplit)
                                      : SplitOnDelimiter(xp[i], a_.delimiter, a_.maxsplit);
      most = std::max(most, static_cast<int64_t>(parts[i].size()));
    }
    Shape ys = x.shape();
    ys.push_back(most);
    Tensor y = Tensor::Strings(ys);
    Tensor z = Tensor::Empty(DataType::kInt64, x.shape());
    std::string* yp = y.data<std::string>();
    int64_t* zp = z.data<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      zp[i] = static_cast<int64_t>(parts[i].size());
      for (size_t k = 0; k < parts[i].size(); ++k) yp[i * most + k] = std::move(parts[i][k]);
    }
    if (!ctx.outputs.empty() && ctx.outputs[0] != nullptr) *ctx.outputs[0] = y;
    if (ctx.outputs.size() > 1 && ctx.outputs[1] != nullptr) *ctx.outputs[1] = z;
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  explicit StringSplitOp(const ir::Node& node) : Op(node) {}

  StringSplitAttrs a_;
};
KILN_REGISTER_OP("StringSplit", 20, ir::kMaxOpset, &StringSplitOp::Create);

// Cases: a delimiter (one and several characters, consecutive and at the ends), whitespace runs
// (Unicode spaces too), maxsplit 0, 1 and 2 both ways, empty strings, an empty tensor, a scalar.
std::vector<OpCase> StringSplitCases() {
  const std::vector<std::string> texts = {"a.b..c.", "", "  x \t y\u00a0z  ", ".", "one"};
  std::vector<OpCase> cases;
  for (const char* d : {".", "", ".."})
    for (int64_t maxsplit : {-1, 0, 1, 2}) {
      OpCase c(std::string("delimiter '") + d + "' maxsplit " + std::to_string(maxsplit), 20);
      c.In(StringTensor(texts, {5})).Str("delimiter", d).Outputs(2);
      if (maxsplit >= 0) c.Int("maxsplit", maxsplit);
      cases.push_back(std::move(c));
    }
  cases.push_back(OpCase("no delimiter [2,2]", 20)
                      .In(StringTensor({"hello world", "a", " ", "the quick fox"}, {2, 2}))
                      .Outputs(2));
  cases.push_back(OpCase("empty [0,3]", 20).In(StringTensor({}, {0, 3})).Outputs(2));
  cases.push_back(OpCase("scalar, Y only", 20).In(StringTensor({"a-b"}, {})).Str("delimiter", "-"));
  return cases;
}
KILN_REGISTER_OP_CASES("", "StringSplit", &StringSplitCases);

}  // namespace
}  // namespace kiln::ops
