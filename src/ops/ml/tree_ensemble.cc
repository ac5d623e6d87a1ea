// TreeEnsemble of the ai.onnx.ml domain (opset 5), reference kernel.
//   X [N, F] (float32, float64 or float16) -> Y [N, n_targets] in X's type. Each tree, starting at
//   its root in tree_roots, walks interior nodes (the nodes_* tuples): a node compares
//   X[n, nodes_featureids[i]] with nodes_splits[i] (BRANCH_LEQ, LT, GTE, GT, EQ, NEQ) or tests it
//   against its set of membership_values (BRANCH_MEMBER; sets separated by NaN, in the order the
//   MEMBER nodes appear in nodes_modes); true goes to nodes_truenodeids[i] (a leaf when
//   nodes_trueleafs[i]), false to nodes_falsenodeids[i]. A NaN feature takes the true branch when
//   nodes_missing_value_tracks_true[i], otherwise the comparison decides (false, but true for
//   NEQ). A root whose both branches are the same leaf is that leaf (a one-leaf tree). The reached
//   leaf adds leaf_weights[l] to target leaf_targetids[l]; targets aggregate by SUM (default),
//   AVERAGE (the sum over the number of trees), MIN or MAX (targets no leaf reached keep the
//   largest / lowest finite value of X's type, as ONNX's reference). post_transform must be NONE.
// Everything is validated at load: lengths, ids in range, a walk that cannot cycle (every node
// reached from a root is visited in depth-first order; a back edge is an error).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/half.h"
#include "ops/common.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

constexpr const char* kMl = "ai.onnx.ml";
enum Mode : uint8_t { kLeq = 0, kLt, kGte, kGt, kEq, kNeq, kMember };
enum Aggregate : int64_t { kAverage = 0, kSum = 1, kMin = 2, kMax = 3 };

struct TreeNode {
  int64_t feature = 0;
  uint8_t mode = kLeq;
  bool missing_true = false;
  double split = 0;
  int64_t next[2] = {0, 0};            // [false, true]
  bool leaf[2] = {false, false};       // whether next[] indexes the leaves
  int64_t set_begin = 0, set_end = 0;  // this node's sorted members in `members`
};

struct TreeEnsembleAttrs : ir::OpAttrs {
  int64_t n_targets = 0;
  int64_t aggregate = kSum;
  std::vector<int64_t> roots;
  std::vector<int64_t> root_leaf;  // -1, or the leaf a one-leaf tree is
  std::vector<TreeNode> nodes;
  std::vector<double> members;
  std::vector<int64_t> leaf_target;
  std::vector<double> leaf_weight;
  int64_t max_feature = -1;  // largest feature id a walk compares
};

std::string Str(int64_t v) { return std::to_string(v); }

// A float32/float64/float16 tensor attribute's values; `present` false when it is absent.
Status FloatTensorAttr(const ir::Node& node, const std::string& name, bool required,
                       std::vector<double>* out, bool* present = nullptr) {
  if (present) *present = node.HasAttr(name);
  if (!node.HasAttr(name))
    return required ? ir::AttrError(node, name + " is required") : OkStatus();
  const Tensor* t = node.GetTensor(name);
  if (!t) return ir::AttrError(node, name + " must be a tensor attribute");
  const DataType d = t->dtype();
  if (d != DataType::kFloat && d != DataType::kDouble && d != DataType::kFloat16)
    return ir::AttrError(
        node, name + " must be a float32, float64 or float16 tensor; got " + DataTypeName(d));
  out->resize(static_cast<size_t>(t->numel()));
  for (int64_t i = 0; i < t->numel(); ++i) (*out)[i] = ReadScalarAsDouble(*t, i);
  return OkStatus();
}

Status RequiredInts(const ir::Node& node, const std::string& name, std::vector<int64_t>* out) {
  if (!node.HasAttr(name)) return ir::AttrError(node, name + " is required");
  *out = node.GetInts(name);
  return OkStatus();
}

Status ParseNodes(const ir::Node& node, TreeEnsembleAttrs& a) {
  std::vector<int64_t> features, trues, falses, true_leafs, false_leafs;
  KILN_RETURN_IF_ERROR(RequiredInts(node, "nodes_featureids", &features));
  KILN_RETURN_IF_ERROR(RequiredInts(node, "nodes_truenodeids", &trues));
  KILN_RETURN_IF_ERROR(RequiredInts(node, "nodes_falsenodeids", &falses));
  KILN_RETURN_IF_ERROR(RequiredInts(node, "nodes_trueleafs", &true_leafs));
  KILN_RETURN_IF_ERROR(RequiredInts(node, "nodes_falseleafs", &false_leafs));
  std::vector<double> splits, members;
  KILN_RETURN_IF_ERROR(FloatTensorAttr(node, "nodes_splits", true, &splits));
  bool has_members = false;
  KILN_RETURN_IF_ERROR(FloatTensorAttr(node, "membership_values", false, &members, &has_members));
  const Tensor* modes = node.GetTensor("nodes_modes");
  if (!node.HasAttr("nodes_modes")) return ir::AttrError(node, "nodes_modes is required");
  if (!modes || modes->dtype() != DataType::kUInt8)
    return ir::AttrError(node, std::string("nodes_modes must be a uint8 tensor; got ") +
                                   (modes ? DataTypeName(modes->dtype()) : "another type"));
  const std::vector<int64_t> missing = node.GetInts("nodes_missing_value_tracks_true");

  const int64_t n = static_cast<int64_t>(features.size());
  if (n == 0) return ir::AttrError(node, "nodes_featureids must not be empty");
  auto same_length = [&](const std::string& name, int64_t len) {
    return len == n ? OkStatus()
                    : ir::AttrError(node, name + " must have one entry per node (" + Str(n) +
                                              ", nodes_featureids' length); got " + Str(len));
  };
  KILN_RETURN_IF_ERROR(same_length("nodes_truenodeids", static_cast<int64_t>(trues.size())));
  KILN_RETURN_IF_ERROR(same_length("nodes_falsenodeids", static_cast<int64_t>(falses.size())));
  KILN_RETURN_IF_ERROR(same_length("nodes_trueleafs", static_cast<int64_t>(true_leafs.size())));
  KILN_RETURN_IF_ERROR(same_length("nodes_falseleafs", static_cast<int64_t>(false_leafs.size())));
  KILN_RETURN_IF_ERROR(same_length("nodes_splits", static_cast<int64_t>(splits.size())));
  KILN_RETURN_IF_ERROR(same_length("nodes_modes", modes->numel()));
  if (!missing.empty())
    KILN_RETURN_IF_ERROR(
        same_length("nodes_missing_value_tracks_true", static_cast<int64_t>(missing.size())));

  const int64_t leaves = static_cast<int64_t>(a.leaf_weight.size());
  a.nodes.resize(static_cast<size_t>(n));
  size_t member_pos = 0;
  for (int64_t i = 0; i < n; ++i) {
    TreeNode& t = a.nodes[i];
    const std::string at = "[" + Str(i) + "]";
    if (features[i] < 0)
      return ir::AttrError(node,
                           "nodes_featureids" + at + " must be >= 0; got " + Str(features[i]));
    t.feature = features[i];
    t.mode = modes->data<uint8_t>()[i];
    if (t.mode > kMember)
      return ir::AttrError(node, "nodes_modes" + at +
                                     " must be in [0, 6] (BRANCH_LEQ .. BRANCH_MEMBER); got " +
                                     Str(t.mode));
    t.split = splits[i];
    if (!missing.empty()) {
      if (missing[i] != 0 && missing[i] != 1)
        return ir::AttrError(node, "nodes_missing_value_tracks_true" + at +
                                       " must be 0 or 1; got " + Str(missing[i]));
      t.missing_true = missing[i] == 1;
    }
    const std::vector<int64_t>* ids[2] = {&falses, &trues};
    const std::vector<int64_t>* is_leaf[2] = {&false_leafs, &true_leafs};
    const char* side[2] = {"false", "true"};
    for (int b = 0; b < 2; ++b) {
      const int64_t flag = (*is_leaf[b])[i], id = (*ids[b])[i];
      if (flag != 0 && flag != 1)
        return ir::AttrError(node, std::string("nodes_") + side[b] + "leafs" + at +
                                       " must be 0 or 1; got " + Str(flag));
      const int64_t bound = flag ? leaves : n;
      if (id < 0 || id >= bound)
        return ir::AttrError(node, std::string("nodes_") + side[b] + "nodeids" + at +
                                       " must be in [0, " + Str(bound) + ") (" +
                                       (flag ? "a leaf" : "a node") + "); got " + Str(id));
      t.leaf[b] = flag == 1;
      t.next[b] = id;
    }
    if (t.mode == kMember) {
      if (member_pos >= members.size())
        return ir::AttrError(node,
                             "membership_values must hold one NaN-terminated set per "
                             "BRANCH_MEMBER node; node " +
                                 Str(i) + " has none" +
                                 (has_members ? "" : " (membership_values is absent)"));
      t.set_begin = static_cast<int64_t>(a.members.size());
      while (member_pos < members.size() && !std::isnan(members[member_pos]))
        a.members.push_back(members[member_pos++]);
      ++member_pos;  // the NaN (or the end)
      t.set_end = static_cast<int64_t>(a.members.size());
      std::sort(a.members.begin() + t.set_begin, a.members.end());
    }
  }
  if (member_pos < members.size())
    return ir::AttrError(node, "membership_values must hold one set per BRANCH_MEMBER node; got " +
                                   Str(static_cast<int64_t>(members.size() - member_pos)) +
                                   " values past the last set");
  return OkStatus();
}

// Depth-first from every root: a node met again while on the current path is a cycle.
Status CheckAcyclic(const ir::Node& node, TreeEnsembleAttrs& a) {
  const size_t n = a.nodes.size();
  std::vector<uint8_t> state(n, 0);            // 0 unseen, 1 on the path, 2 done
  std::vector<std::pair<int64_t, int>> stack;  // node, branches pushed so far
  for (size_t r = 0; r < a.roots.size(); ++r) {
    if (a.root_leaf[r] >= 0 || state[a.roots[r]] == 2) continue;
    stack.push_back({a.roots[r], 0});
    state[a.roots[r]] = 1;
    while (!stack.empty()) {
      auto& [i, b] = stack.back();
      const TreeNode& t = a.nodes[i];
      if (b == 0) a.max_feature = std::max(a.max_feature, t.feature);
      if (b == 2) {
        state[i] = 2;
        stack.pop_back();
        continue;
      }
      const int side = b++;
      if (t.leaf[side]) continue;
      const int64_t next = t.next[side];
      if (state[next] == 1)
        return ir::AttrError(node, std::string("nodes_") + (side ? "true" : "false") + "nodeids[" +
                                       Str(i) + "] must not lead back to node " + Str(next) +
                                       " (a cycle in the tree of root " + Str(a.roots[r]) + ")");
      if (state[next] == 0) {
        state[next] = 1;
        stack.push_back({next, 0});
      }
    }
  }
  return OkStatus();
}

class TreeEnsembleOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    auto op = std::make_unique<TreeEnsembleOp>(node);
    TreeEnsembleAttrs& a = op->a_;
    const int64_t post = node.GetInt("post_transform", 0);
    if (post != 0)
      return ir::AttrError(node, "post_transform must be 0 (NONE) in opset 5; got " + Str(post));
    a.aggregate = node.GetInt("aggregate_function", kSum);
    if (a.aggregate < kAverage || a.aggregate > kMax)
      return ir::AttrError(node,
                           "aggregate_function must be 0 (AVERAGE), 1 (SUM), 2 (MIN) or "
                           "3 (MAX); got " +
                               Str(a.aggregate));
    if (!node.HasAttr("n_targets")) return ir::AttrError(node, "n_targets is required");
    a.n_targets = node.GetInt("n_targets", 0);
    if (a.n_targets < 1)
      return ir::AttrError(node, "n_targets must be >= 1; got " + Str(a.n_targets));

    KILN_RETURN_IF_ERROR(FloatTensorAttr(node, "leaf_weights", true, &a.leaf_weight));
    KILN_RETURN_IF_ERROR(RequiredInts(node, "leaf_targetids", &a.leaf_target));
    const int64_t leaves = static_cast<int64_t>(a.leaf_weight.size());
    if (static_cast<int64_t>(a.leaf_target.size()) != leaves)
      return ir::AttrError(node, "leaf_targetids must have one entry per leaf (" + Str(leaves) +
                                     ", leaf_weights' size); got " +
                                     Str(static_cast<int64_t>(a.leaf_target.size())));
    for (int64_t l = 0; l < leaves; ++l)
      if (a.leaf_target[l] < 0 || a.leaf_target[l] >= a.n_targets)
        return ir::AttrError(node, "leaf_targetids[" + Str(l) + "] must be in [0, " +
                                       Str(a.n_targets) + ") (n_targets); got " +
                                       Str(a.leaf_target[l]));

    KILN_RETURN_IF_ERROR(ParseNodes(node, a));
    KILN_RETURN_IF_ERROR(RequiredInts(node, "tree_roots", &a.roots));
    if (a.roots.empty()) return ir::AttrError(node, "tree_roots must name at least one tree");
    const int64_t n = static_cast<int64_t>(a.nodes.size());
    for (size_t r = 0; r < a.roots.size(); ++r) {
      const int64_t root = a.roots[r];
      if (root < 0 || root >= n)
        return ir::AttrError(node, "tree_roots[" + Str(static_cast<int64_t>(r)) +
                                       "] must be in [0, " + Str(n) + ") (a node); got " +
                                       Str(root));
      const TreeNode& t = a.nodes[root];
      const bool one_leaf = t.leaf[0] && t.leaf[1] && t.next[0] == t.next[1];
      a.root_leaf.push_back(one_leaf ? t.next[1] : -1);
    }
    KILN_RETURN_IF_ERROR(CheckAcyclic(node, a));
    return std::unique_ptr<ir::Op>(std::move(op));
  }
  explicit TreeEnsembleOp(const ir::Node& node) : Op(node) {}

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat, DataType::kDouble}));
    if (ctx.rank(0) != 2)
      return ctx.Error("X must have rank 2 ([N, F]); got shape " + ShapeToString(ctx.shape(0)));
    if (a_.max_feature >= ctx.shape(0)[1])
      return ctx.Error("nodes_featureids must be below X's " + Str(ctx.shape(0)[1]) +
                       " columns; got feature " + Str(a_.max_feature));
    ctx.SetOutput(0, ctx.dtype(0), {ctx.shape(0)[0], a_.n_targets});
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    Tensor& y = ctx.out(0);
    const DataType d = x.dtype();
    if (d != DataType::kFloat && d != DataType::kDouble && d != DataType::kFloat16)
      return RunError(std::string("X must be float32, float64 or float16; got ") + DataTypeName(d));
    if (x.rank() != 2 || a_.max_feature >= x.shape()[1])
      return RunError("X must be [N, F] with F > " + Str(a_.max_feature) +
                      " (the largest feature id); got " + ShapeToString(x.shape()));
    const int64_t rows = x.shape()[0], cols = x.shape()[1], targets = a_.n_targets;
    double start = 0;
    if (a_.aggregate == kMin || a_.aggregate == kMax) {
      start = d == DataType::kFloat16 ? 65504.0
              : d == DataType::kFloat ? std::numeric_limits<float>::max()
                                      : std::numeric_limits<double>::max();
      if (a_.aggregate == kMax) start = -start;
    }
    std::vector<double> row(static_cast<size_t>(cols)), acc(static_cast<size_t>(targets));
    const int64_t limit = static_cast<int64_t>(a_.nodes.size());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) row[c] = Load(x, r * cols + c);
      std::fill(acc.begin(), acc.end(), start);
      for (size_t tree = 0; tree < a_.roots.size(); ++tree) {
        int64_t leaf = a_.root_leaf[tree];
        int64_t i = a_.roots[tree];
        for (int64_t steps = 0; leaf < 0; ++steps) {
          if (steps > limit) return RunError("a tree walk exceeded the node count (a cycle)");
          const TreeNode& t = a_.nodes[i];
          const int side = Decide(t, row[t.feature]) ? 1 : 0;
          (t.leaf[side] ? leaf : i) = t.next[side];
        }
        const double w = a_.leaf_weight[leaf];
        double& v = acc[a_.leaf_target[leaf]];
        if (a_.aggregate == kMin)
          v = std::min(v, w);
        else if (a_.aggregate == kMax)
          v = std::max(v, w);
        else
          v += w;
      }
      const double scale =
          a_.aggregate == kAverage ? 1.0 / static_cast<double>(a_.roots.size()) : 1.0;
      for (int64_t t = 0; t < targets; ++t) Store(y, r * targets + t, acc[t] * scale);
    }
    return OkStatus();
  }
  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  bool Decide(const TreeNode& t, double v) const {
    if (t.missing_true && std::isnan(v)) return true;
    switch (t.mode) {
      case kLeq:
        return v <= t.split;
      case kLt:
        return v < t.split;
      case kGte:
        return v >= t.split;
      case kGt:
        return v > t.split;
      case kEq:
        return v == t.split;
      case kNeq:
        return v != t.split;
      default:  // BRANCH_MEMBER; sets hold no NaN
        return !std::isnan(v) && std::binary_search(a_.members.begin() + t.set_begin,
                                                    a_.members.begin() + t.set_end, v);
    }
  }
  static double Load(const Tensor& x, int64_t i) {
    if (x.dtype() == DataType::kFloat16) return HalfToFloat(x.data<uint16_t>()[i]);
    return x.dtype() == DataType::kFloat ? x.data<float>()[i] : x.data<double>()[i];
  }
  static void Store(Tensor& y, int64_t i, double v) {
    if (y.dtype() == DataType::kFloat16)
      y.data<uint16_t>()[i] = DoubleToHalf(v);
    else if (y.dtype() == DataType::kFloat)
      y.data<float>()[i] = static_cast<float>(v);
    else
      y.data<double>()[i] = v;
  }

  TreeEnsembleAttrs a_;
};

KILN_REGISTER_OP_DOMAIN(kMl, "TreeEnsemble", 5, 5, &TreeEnsembleOp::Create);

// The cases' ensemble, 3 features and 3 targets: tree A (root 0) uses LEQ, MEMBER, GT (NaN goes
// true) and NEQ; tree B (root 4) LT, GTE and EQ; tree C (root 7) is one leaf.
OpCase Ensemble(const std::string& name, int64_t aggregate, bool dbl, Tensor x) {
  auto tensor_attr = [](Tensor t) {
    ir::Attribute a;
    a.type = ir::Attribute::Type::kTensor;
    a.t = std::move(t);
    return a;
  };
  auto floats = [&](const std::vector<double>& v) {
    const Shape shape{static_cast<int64_t>(v.size())};
    if (dbl) return tensor_attr(Tensor::FromVector<double>(v, shape));
    return tensor_attr(Tensor::FromVector<float>(std::vector<float>(v.begin(), v.end()), shape));
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  OpCase c(name, 5);
  c.In(std::move(x))
      .Int("aggregate_function", aggregate)
      .Int("n_targets", 3)
      .Ints("tree_roots", {0, 4, 7})
      .Ints("nodes_featureids", {0, 2, 1, 2, 1, 0, 2, 0})
      .Ints("nodes_truenodeids", {1, 0, 2, 3, 5, 6, 7, 9})
      .Ints("nodes_trueleafs", {0, 1, 1, 1, 1, 1, 1, 1})
      .Ints("nodes_falsenodeids", {2, 1, 3, 4, 5, 6, 8, 9})
      .Ints("nodes_falseleafs", {0, 1, 0, 1, 0, 0, 1, 1})
      .Ints("nodes_missing_value_tracks_true", {0, 0, 1, 0, 0, 0, 0, 0})
      .Ints("leaf_targetids", {0, 1, 0, 1, 2, 0, 1, 2, 0, 2});
  c.attrs["nodes_modes"] = tensor_attr(
      Tensor::FromVector<uint8_t>({kLeq, kMember, kGt, kNeq, kLt, kGte, kEq, kLeq}, {8}));
  c.attrs["nodes_splits"] = floats({0.0, nan, 0.5, 3.0, -0.25, 0.5, 2.0, 0.0});
  c.attrs["membership_values"] = floats({5.0, 1.0, 2.0, nan});
  c.attrs["leaf_weights"] = floats({1.5, -2.0, 0.25, 4.0, -0.75, 3.0, 0.5, -1.25, 2.5, 0.125});
  return c;
}

Tensor CaseX() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  return CaseFloats({-1.f, 0.f, 2.f, 1.f, nan,  3.f,  0.7f, 0.1f, 3.f,   -0.3f, -1.f,
                     7.f,  nan, 2.f, 2.f, 0.2f, 0.2f, 5.f,  0.6f, -0.5f, 1.f},
                    {7, 3});
}

std::vector<OpCase> TreeEnsembleCases() {
  Tensor xd = Tensor::Empty(DataType::kDouble, {7, 3});
  const Tensor xf = CaseX();
  for (int64_t i = 0; i < xf.numel(); ++i) xd.data<double>()[i] = xf.data<float>()[i];
  return {Ensemble("float32 SUM, member, NaN features, one-leaf tree", kSum, false, CaseX()),
          Ensemble("float32 AVERAGE", kAverage, false, CaseX()),
          Ensemble("float32 MIN", kMin, false, CaseX()),
          Ensemble("float32 MAX", kMax, false, CaseX()),
          Ensemble("float64 X, float64 splits and weights, SUM", kSum, true, xd),
          Ensemble("float64 X, float32 attributes, AVERAGE", kAverage, false, xd),
          Ensemble("float32 [1,3] one row", kSum, true, CaseTensor({1, 3}, 3, -1.f, 6.f))};
}
KILN_REGISTER_OP_CASES(kMl, "TreeEnsemble", &TreeEnsembleCases);

}  // namespace
}  // namespace kiln::ops
