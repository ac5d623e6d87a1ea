// Einsum (opset 12). Reference kernel: one sum over every combination of the equation's labels.
//
// equation: "term,term,...[->term]" with one term per input; a term is letters (a-z, A-Z), at
// most one "..." and spaces (ignored). A letter names one dim; a letter repeated inside a term
// takes that term's diagonal. "..." stands for the dims a term's letters leave unnamed; the
// ellipsis dims of all inputs broadcast against each other, right-aligned, as do the sizes of a
// letter across its occurrences (equal, or 1). The output (explicit after "->"; implicit
// otherwise: the ellipsis dims, then the letters that appear once, in ASCII order as numpy) lists
// each of its labels once; every label not in it is summed over (the ellipsis dims too when an
// explicit output omits "...").
//
// Cost: prod(sizes of every label) * inputs multiply-adds (no contraction order, no BLAS): the
// oracle, not a fast kernel. Sums in double for float types, in int64 for integers.
// dtypes: float32 (float16 as float32), float64, int32, int64.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/tensor_util.h"
#include "ops/typed_dispatch.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;
using ir::Op;

constexpr int kEllipsis = -1;         // the "..." marker inside a parsed term
constexpr int kEllipsisLabel = 1000;  // label of ellipsis dim j (right-aligned): 1000 + j

struct EinsumAttrs : ir::OpAttrs {
  std::string equation;
  std::vector<std::vector<int>> inputs;  // per term: letters (char codes) and kEllipsis
  bool explicit_output = false;
  std::vector<int> output;
};

// A term's labels; the violated rule, or "".
std::string ParseTerm(const std::string& t, std::vector<int>* labels) {
  bool ellipsis = false;
  for (size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      labels->push_back(c);
    } else if (c == '.') {
      if (t.compare(i, 3, "...") != 0 || ellipsis)
        return "a term holds letters and at most one '...'; got '" + t + "'";
      ellipsis = true;
      labels->push_back(kEllipsis);
      i += 2;
    } else {
      return "a term holds letters and at most one '...'; got '" + t + "'";
    }
  }
  return "";
}

std::string ParseEquation(const std::string& eq, EinsumAttrs* a) {
  std::string s;
  for (char c : eq)
    if (c != ' ') s += c;
  const size_t arrow = s.find("->");
  const std::string lhs = s.substr(0, arrow);
  size_t start = 0;
  while (true) {
    const size_t comma = lhs.find(',', start);
    a->inputs.emplace_back();
    const std::string err = ParseTerm(
        lhs.substr(start, comma == std::string::npos ? comma : comma - start), &a->inputs.back());
    if (!err.empty()) return err;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (arrow != std::string::npos) {
    a->explicit_output = true;
    const std::string rhs = s.substr(arrow + 2);
    if (rhs.find("->") != std::string::npos || rhs.find(',') != std::string::npos)
      return "the output after '->' is one term; got '" + rhs + "'";
    const std::string err = ParseTerm(rhs, &a->output);
    if (!err.empty()) return err;
  }
  return "";
}

// The equation resolved against concrete input shapes.
struct EinsumPlan {
  std::vector<int> labels;                    // every label: the output's, then the summed ones
  std::vector<int64_t> sizes;                 // per label
  size_t num_out = 0;                         // labels[0, num_out) are the output dims
  std::vector<std::vector<int64_t>> strides;  // per input, per label: element stride (0: unused)
  Shape out_shape;
};

std::string Resolve(const EinsumAttrs& a, const std::vector<Shape>& shapes, EinsumPlan* plan) {
  if (shapes.size() != a.inputs.size())
    return "the equation '" + a.equation + "' has " + std::to_string(a.inputs.size()) +
           " input term(s); got " + std::to_string(shapes.size()) + " input(s)";
  // Each input dim's label; ellipsis dims are right-aligned against the longest ellipsis.
  std::vector<int64_t> ell(shapes.size());
  int64_t ellipsis_rank = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::vector<int>& term = a.inputs[i];
    const bool has_ellipsis = std::count(term.begin(), term.end(), kEllipsis) > 0;
    const int64_t letters = static_cast<int64_t>(term.size()) - (has_ellipsis ? 1 : 0);
    const int64_t rank = static_cast<int64_t>(shapes[i].size());
    if (has_ellipsis ? rank < letters : rank != letters)
      return "term " + std::to_string(i) + " names " + std::to_string(letters) + " dim(s)" +
             (has_ellipsis ? " besides '...'" : "") + "; got input shape " +
             ShapeToString(shapes[i]);
    ell[i] = rank - letters;
    ellipsis_rank = std::max(ellipsis_rank, ell[i]);
  }
  std::vector<std::vector<int>> dims(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i)
    for (int l : a.inputs[i]) {
      if (l != kEllipsis) {
        dims[i].push_back(l);
        continue;
      }
      for (int64_t j = ellipsis_rank - ell[i]; j < ellipsis_rank; ++j)
        dims[i].push_back(kEllipsisLabel + static_cast<int>(j));
    }
  std::map<int, int64_t> size;  // label -> size
  std::map<int, int> uses;
  for (size_t i = 0; i < shapes.size(); ++i)
    for (size_t d = 0; d < dims[i].size(); ++d) {
      const int l = dims[i][d];
      const int64_t n = shapes[i][d];
      auto it = size.find(l);
      ++uses[l];
      if (it == size.end() || it->second == 1) {
        size[l] = n;
      } else if (n != 1 && n != it->second) {
        const std::string name =
            l >= kEllipsisLabel ? "an ellipsis dim" : "label '" + std::string(1, char(l)) + "'";
        return name + " has sizes " + std::to_string(it->second) + " and " + std::to_string(n) +
               " (they must be equal or 1); got input shape " + ShapeToString(shapes[i]);
      }
    }
  std::vector<int> out;
  auto add_ellipsis = [&] {
    for (int64_t j = 0; j < ellipsis_rank; ++j) out.push_back(kEllipsisLabel + static_cast<int>(j));
  };
  if (a.explicit_output) {
    for (int l : a.output) {
      if (l == kEllipsis) {
        add_ellipsis();
        continue;
      }
      if (size.count(l) == 0)
        return "output label '" + std::string(1, char(l)) + "' appears in no input term";
      if (std::count(out.begin(), out.end(), l) > 0)
        return "output label '" + std::string(1, char(l)) + "' appears twice";
      out.push_back(l);
    }
  } else {
    add_ellipsis();
    for (const auto& [l, n] : size)
      if (l < kEllipsisLabel && uses[l] == 1) out.push_back(l);
  }
  plan->labels = out;
  plan->num_out = out.size();
  for (const auto& [l, n] : size)
    if (std::count(out.begin(), out.end(), l) == 0) plan->labels.push_back(l);
  plan->sizes.clear();
  for (int l : plan->labels) plan->sizes.push_back(size[l]);
  plan->out_shape.assign(plan->sizes.begin(), plan->sizes.begin() + plan->num_out);
  plan->strides.assign(shapes.size(), std::vector<int64_t>(plan->labels.size(), 0));
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::vector<int64_t> st = Strides(shapes[i]);
    for (size_t d = 0; d < dims[i].size(); ++d) {
      const size_t k =
          std::find(plan->labels.begin(), plan->labels.end(), dims[i][d]) - plan->labels.begin();
      if (shapes[i][d] != 1) plan->strides[i][k] += st[d];  // repeated: the diagonal
    }
  }
  return "";
}

template <typename T, typename Acc>
void RunEinsum(const EinsumPlan& p, const std::vector<const T*>& x, T* y) {
  const size_t nl = p.labels.size();
  int64_t out_n = 1, sum_n = 1;
  for (size_t k = 0; k < nl; ++k) (k < p.num_out ? out_n : sum_n) *= p.sizes[k];
  std::vector<int64_t> idx(nl, 0);
  for (int64_t o = 0; o < out_n; ++o) {
    Acc acc = 0;
    for (int64_t s = 0; s < sum_n; ++s) {
      // idx holds the label indices of combination (o, s), row-major over p.labels.
      Acc prod = 1;
      for (size_t i = 0; i < x.size(); ++i) {
        int64_t off = 0;
        for (size_t k = 0; k < nl; ++k) off += idx[k] * p.strides[i][k];
        prod *= static_cast<Acc>(x[i][off]);
      }
      acc += prod;
      for (int64_t k = static_cast<int64_t>(nl) - 1; k >= 0; --k) {
        if (++idx[k] < p.sizes[k]) break;
        idx[k] = 0;
      }
    }
    y[o] = static_cast<T>(acc);  // an empty sum (a summed label of size 0) gives 0
  }
}

class EinsumOp final : public Op {
 public:
  static StatusOr<std::unique_ptr<Op>> Create(const Node& node) {
    std::unique_ptr<EinsumOp> op(new EinsumOp(node));
    if (!node.HasAttr("equation")) return ir::AttrError(node, "equation is required; got none");
    op->a_.equation = node.GetString("equation", "");
    const std::string err = ParseEquation(op->a_.equation, &op->a_);
    if (!err.empty()) return ir::AttrError(node, "equation '" + op->a_.equation + "': " + err);
    return std::unique_ptr<Op>(std::move(op));
  }

  Status Infer(InferContext& ctx) const override {
    std::vector<Shape> shapes;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      KILN_RETURN_IF_ERROR(ctx.ExpectDtype(
          i, {DataType::kFloat, DataType::kDouble, DataType::kInt32, DataType::kInt64}));
      if (ctx.dtype(i) != ctx.dtype(0))
        return ctx.Error("every input must have input 0's dtype " +
                         std::string(DataTypeName(ctx.dtype(0))) + "; got " +
                         DataTypeName(ctx.dtype(i)) + " for input " + std::to_string(i));
      shapes.push_back(ctx.shape(i));
    }
    EinsumPlan plan;
    const std::string err = Resolve(a_, shapes, &plan);
    if (!err.empty()) return ctx.Error(err);
    ctx.SetOutput(0, ctx.dtype(0), plan.out_shape);
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    std::vector<Shape> shapes;
    for (const Tensor* t : ctx.inputs) shapes.push_back(t->shape());
    EinsumPlan plan;
    const std::string err = Resolve(a_, shapes, &plan);
    if (!err.empty()) return RunError(err);
    return DispatchAmong<float, double, int32_t, int64_t>(
        ctx.in(0).dtype(), describe(), [&](auto tag) {
          using T = decltype(tag);
          using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
          std::vector<const T*> x;
          for (const Tensor* t : ctx.inputs) x.push_back(t->data<T>());
          RunEinsum<T, Acc>(plan, x, ctx.out(0).data<T>());
          return OkStatus();
        });
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  explicit EinsumOp(const Node& node) : Op(node) {}

  EinsumAttrs a_;
};

KILN_REGISTER_OP("Einsum", 12, ir::kMaxOpset, &EinsumOp::Create);

// Cases: matmul and batch matmul, transpose, sums, inner and outer products, a diagonal (also
// under "..."), ellipsis broadcasting against a size-1 dim, the implicit output, a scalar, int64.
std::vector<OpCase> EinsumCases() {
  struct Eq {
    const char* equation;
    std::vector<Shape> shapes;
  };
  const Eq eqs[] = {
      {"ij,jk->ik", {{3, 5}, {5, 4}}},
      {"bij, bjk -> bik", {{2, 3, 5}, {2, 5, 1}}},
      {"ij->ji", {{3, 4}}},
      {"ij->i", {{3, 7}}},
      {"i,i", {{5}, {5}}},
      {"i,j->ij", {{3}, {4}}},
      {"...ii->...i", {{3, 5, 5}}},
      {"ii", {{4, 4}}},
      {"...ij,...jk", {{2, 1, 3, 4}, {3, 4, 2}}},
      {"bij,jk->...", {{2, 3, 4}, {4, 5}}},
      {"abc,cd,bd->ad", {{2, 3, 4}, {4, 5}, {3, 5}}},
      {"->", {{}}},
      {"Ba,aB->aB", {{3, 2}, {2, 3}}},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 1;
  for (const Eq& e : eqs) {
    OpCase c(std::string("'") + e.equation + "'", 12);
    c.Str("equation", e.equation);
    for (const Shape& s : e.shapes) c.In(CaseTensor(s, seed++));
    cases.push_back(std::move(c));
  }
  cases.push_back(OpCase("int64 'ij,jk'", 12)
                      .Str("equation", "ij,jk")
                      .In(CaseInts(DataType::kInt64, {2, 3}, 90, -50, 50))
                      .In(CaseInts(DataType::kInt64, {3, 4}, 91, -50, 50)));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Einsum", &EinsumCases);

}  // namespace
}  // namespace kiln::ops
