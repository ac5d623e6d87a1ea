// StringNormalizer (opset 10): X, a string tensor [C] or [1, C] (ONNX's reference also takes
// [N, C]), with stop words removed and case changed.
//   Stop words: each element is split on single spaces and the words that are stop words are
//   dropped (the rest joined again by single spaces), as ONNX's reference does; an element that is
//   one stop word becomes "". is_case_sensitive = 1: exact comparison, before the case change;
//   0 (default): after the case change, comparing lowercased words with lowercased stop words.
//   case_change_action: LOWER, UPPER or NONE (default).
//   Shape, as ONNX's reference: for [C] and [1, C] the empty strings of the result are dropped
//   ([C'] or [1, C']); when none is left the output is [""] ([1] or [1, 1]). [N, C] with N > 1
//   keeps its shape. Other ranks are refused.
// Case: kiln changes case by Unicode's simple (one to one) case mapping of UTF-8 code points,
// glibc's towlower/towupper under a C.UTF-8 locale (ops/text/utf8.h), whatever the `locale`
// attribute says (it is accepted and not used). Python's str.lower/upper (ONNX's reference) use
// the full mapping, which differs for a few characters ('ß'.upper() is "SS" there, "ß" here).
// ONNX's reference also strips accents from non-ASCII strings (NFKD); kiln does not (nor does the
// ONNX spec ask it, nor ONNX Runtime). With is_case_sensitive = 0 and NONE, ONNX's reference
// compares words exactly; kiln ignores case, as the attribute says.
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/text/text_common.h"
#include "ops/text/utf8.h"

namespace kiln::ops {
namespace {

enum class CaseChange { kNone, kLower, kUpper };

struct StringNormalizerAttrs : ir::OpAttrs {
  CaseChange case_change = CaseChange::kNone;
  bool case_sensitive = false;
  std::string locale;  // accepted, not used (see the file comment)
  // Stop words as compared: as given (case-sensitive) or lowercased.
  std::unordered_set<std::string> stopwords;
};

class StringNormalizerOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    std::unique_ptr<StringNormalizerOp> op(new StringNormalizerOp(node));
    StringNormalizerAttrs& a = op->a_;
    const std::string action = node.GetString("case_change_action", "NONE");
    if (action == "LOWER") {
      a.case_change = CaseChange::kLower;
    } else if (action == "UPPER") {
      a.case_change = CaseChange::kUpper;
    } else if (action != "NONE") {
      return ir::AttrError(node,
                           "case_change_action must be LOWER, UPPER or NONE; got '" + action + "'");
    }
    const int64_t sensitive = node.GetInt("is_case_sensitive", 0);
    if (sensitive != 0 && sensitive != 1)
      return ir::AttrError(node,
                           "is_case_sensitive must be 0 or 1; got " + std::to_string(sensitive));
    a.case_sensitive = sensitive == 1;
    a.locale = node.GetString("locale", "");
    auto it = node.attrs.find("stopwords");
    if (it != node.attrs.end())
      for (const std::string& w : it->second.strings)
        a.stopwords.insert(a.case_sensitive ? w : ChangeCase(w, false));
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  bool ShapesFromRun() const override { return true; }
  bool TakesNonPlainValues() const override { return true; }
  // Not asked for shapes (ShapesFromRun): checks X and gives the output's dtype.
  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kString}));
    if (ctx.rank(0) != 1 && ctx.rank(0) != 2)
      return ctx.Error("X must be [C] or [1, C]; got " + ShapeToString(ctx.shape(0)));
    ctx.SetOutput(0, DataType::kString, {});
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectStringInput(*this, ctx, 0, "X"));
    const Tensor& x = ctx.in(0);
    if (x.rank() != 1 && x.rank() != 2)
      return RunError("X must be [C] or [1, C]; got " + ShapeToString(x.shape()));
    const std::string* xp = x.data<std::string>();
    std::vector<std::string> res(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) res[i] = Normalize(xp[i]);
    if (!ctx.outputs.empty() && ctx.outputs[0] != nullptr)
      *ctx.outputs[0] = Result(x.shape(), std::move(res));
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  explicit StringNormalizerOp(const ir::Node& node) : Op(node) {}

  std::string Normalize(const std::string& s) const {
    std::string out = s;
    if (a_.case_sensitive) out = RemoveStopwords(out);
    if (a_.case_change != CaseChange::kNone)
      out = ChangeCase(out, a_.case_change == CaseChange::kUpper);
    if (!a_.case_sensitive) out = RemoveStopwords(out);
    return out;
  }

  // The words of s (split on single spaces) that are not stop words, joined by single spaces.
  std::string RemoveStopwords(const std::string& s) const {
    if (a_.stopwords.empty()) return s;
    std::string out;
    bool first = true;
    for (size_t start = 0;;) {
      const size_t end = std::min(s.find(' ', start), s.size());
      const std::string word = s.substr(start, end - start);
      if (!a_.stopwords.count(a_.case_sensitive ? word : ChangeCase(word, false))) {
        if (!first) out.push_back(' ');
        out += word;
        first = false;
      }
      if (end == s.size()) break;
      start = end + 1;
    }
    return out;
  }

  // The output for X's shape: [C] and [1, C] drop empty strings ([""] when none is left).
  static Tensor Result(const Shape& shape, std::vector<std::string> res) {
    if (shape.size() == 2 && shape[0] != 1) return StringTensor(res, shape);
    std::vector<std::string> kept;
    for (std::string& s : res)
      if (!s.empty()) kept.push_back(std::move(s));
    if (kept.empty()) kept.push_back("");
    const int64_t n = static_cast<int64_t>(kept.size());
    return StringTensor(kept, shape.size() == 1 ? Shape{n} : Shape{1, n});
  }

  StringNormalizerAttrs a_;
};
KILN_REGISTER_OP("StringNormalizer", 10, ir::kMaxOpset, &StringNormalizerOp::Create);

// Cases: each case action with stop words, case-sensitive and not, [C] and [1, C], every element
// dropped ([""] / [[""]]), multi-word elements, non-ASCII letters, [2, C] (kept shape).
std::vector<OpCase> StringNormalizerCases() {
  std::vector<OpCase> cases;
  const std::vector<std::string> days = {"Monday", "tuesday", "", "monday tuesday", "Ünïcode ÀB"};
  for (const char* action : {"LOWER", "UPPER", "NONE"})
    for (int sensitive : {0, 1}) {
      OpCase c(std::string(action) + (sensitive ? " sensitive" : " insensitive") + " [5]", 10);
      c.In(StringTensor(days, {5}))
          .Str("case_change_action", action)
          .Int("is_case_sensitive", sensitive);
      SetStringsAttr(c, "stopwords", {"monday"});
      cases.push_back(std::move(c));
    }
  OpCase all("all dropped [1,2]", 10);
  all.In(StringTensor({"monday", "MONDAY"}, {1, 2})).Str("case_change_action", "UPPER");
  SetStringsAttr(all, "stopwords", {"Monday"});
  cases.push_back(std::move(all));
  cases.push_back(OpCase("no stop words, locale [1,3]", 10)
                      .In(StringTensor({"a B", "Ωmega", "x"}, {1, 3}))
                      .Str("case_change_action", "LOWER")
                      .Str("locale", "tr_TR"));
  cases.push_back(OpCase("[2,2] keeps its shape", 10)
                      .In(StringTensor({"A", "", "b", "C"}, {2, 2}))
                      .Str("case_change_action", "LOWER"));
  cases.push_back(OpCase("empty [0]", 10).In(StringTensor({}, {0})));
  return cases;
}
KILN_REGISTER_OP_CASES("", "StringNormalizer", &StringNormalizerCases);

}  // namespace
}  // namespace kiln::ops
