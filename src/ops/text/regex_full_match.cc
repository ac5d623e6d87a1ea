// RegexFullMatch (opset 20): Y[i] = whether the whole of X[i] matches `pattern` (RE2 syntax,
// UTF-8), X a string tensor of any shape, Y bool of the same shape. The pattern is compiled once
// when the node loads (RE2's Options: UTF-8, errors not logged); a pattern RE2 refuses is an
// attribute error naming it and RE2's message. Matching reads the compiled RE2 from several threads
// at once, which RE2 allows.
#include <re2/re2.h>

#include <memory>
#include <string>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/text/text_common.h"

namespace kiln::ops {
namespace {

struct RegexFullMatchAttrs : ir::OpAttrs {
  std::string pattern;
  std::shared_ptr<const re2::RE2> regex;  // compiled, never null once created
};

class RegexFullMatchOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    if (!node.HasAttr("pattern")) return ir::AttrError(node, "the pattern attribute is required");
    std::unique_ptr<RegexFullMatchOp> op(new RegexFullMatchOp(node));
    op->a_.pattern = node.GetString("pattern", "");
    re2::RE2::Options options;
    options.set_log_errors(false);
    auto regex = std::make_shared<re2::RE2>(op->a_.pattern, options);
    if (!regex->ok())
      return ir::AttrError(node, "pattern must be a valid RE2 regular expression; got '" +
                                     op->a_.pattern + "': " + regex->error());
    op->a_.regex = std::move(regex);
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  // Reads strings; Y (bool) is allocated by the executor.
  bool TakesNonPlainValues() const override { return true; }
  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kString}));
    ctx.SetOutput(0, DataType::kBool, ctx.shape(0));
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ExpectStringInput(*this, ctx, 0, "X"));
    const Tensor& x = ctx.in(0);
    Tensor& y = ctx.out(0);
    if (y.dtype() != DataType::kBool || y.numel() != x.numel())
      return RunError("Y must be bool with X's shape " + ShapeToString(x.shape()) + "; got " +
                      DataTypeName(y.dtype()) + " " + ShapeToString(y.shape()));
    const std::string* xp = x.data<std::string>();
    bool* yp = y.data<bool>();
    for (int64_t i = 0; i < x.numel(); ++i) yp[i] = re2::RE2::FullMatch(xp[i], *a_.regex);
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  explicit RegexFullMatchOp(const ir::Node& node) : Op(node) {}

  RegexFullMatchAttrs a_;
};
KILN_REGISTER_OP("RegexFullMatch", 20, ir::kMaxOpset, &RegexFullMatchOp::Create);

// Cases: a partial match that must fail, anchors and alternation, UTF-8 classes, the empty string,
// an empty tensor.
std::vector<OpCase> RegexFullMatchCases() {
  std::vector<OpCase> cases;
  cases.push_back(
      OpCase("domains [2,2]", 20)
          .In(StringTensor({"www.google.com", "www.bbc.co.uk", "xwww.a.com", ""}, {2, 2}))
          .Str("pattern", R"(www\.[\w.-]+\.\bcom\b)"));
  cases.push_back(OpCase("unicode [3]", 20)
                      .In(StringTensor({"中文", "abc", "中a"}, {3}))
                      .Str("pattern", R"(\p{Han}+|[a-c]*)"));
  cases.push_back(OpCase("empty [2,0]", 20).In(StringTensor({}, {2, 0})).Str("pattern", "a"));
  return cases;
}
KILN_REGISTER_OP_CASES("", "RegexFullMatch", &RegexFullMatchCases);

}  // namespace
}  // namespace kiln::ops
