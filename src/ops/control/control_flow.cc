// If (1-24), Loop (1-24) and Scan (9-24): the semantics of control_flow.h, run through BodyRunners.
//
// If: `cond` (one bool element) picks then_branch or else_branch; the branch's outputs are the
// node's outputs, whatever their shapes (branches may differ).
// Loop: M (optional int64 trip count) and cond (optional bool); the body sees (iteration number,
// cond, N carried values) and returns (cond, N carried values, K scan outputs). The node's outputs
// are the N final carried values and the K scan outputs stacked on a new first axis. A loop with
// neither M nor cond ends only through the body's cond; every loop stops with InvalidArgument
// after LoopMaxIterations() iterations. Scan outputs must keep one shape and dtype over the
// iterations. With zero iterations a scan output is empty, [0] plus the body's declared shape
// when that is fixed.
// Scan-9+: N state variables and M scan inputs, sliced along scan_input_axes (reversed with
// scan_input_directions 1); the body sees (N states, M slices) and returns (N states, K scan
// output slices), stacked along scan_output_axes (reversed with scan_output_directions 1).
// Scan-8 (batch axis, sequence_lens) is refused. Sequence- and optional-typed bodies are refused
// by their nodes (kiln has no sequence type).
#include "ops/control/control_flow.h"

#include <algorithm>
#include <cstring>

#include "ops/common.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::Node;

// t without axis `axis`, at position `index` along it (a copy).
Tensor SliceAlong(const Tensor& t, int64_t axis, int64_t index) {
  Shape shape = t.shape();
  const int64_t n = shape[axis];
  shape.erase(shape.begin() + axis);
  Tensor out = Tensor::Empty(t.dtype(), shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= t.shape()[d];
  for (int64_t d = axis + 1; d < t.rank(); ++d) inner *= t.shape()[d];
  const size_t row = static_cast<size_t>(inner) * DataTypeSize(t.dtype());
  const char* src = static_cast<const char*>(t.raw());
  char* dst = static_cast<char*>(out.raw());
  for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * row, src + (o * n + index) * row, row);
  return out;
}

// The tensors (one shape and dtype) stacked on a new axis `axis`, item k at position k.
Tensor StackAlong(const std::vector<Tensor>& items, int64_t axis) {
  Shape shape = items[0].shape();
  const int64_t n = static_cast<int64_t>(items.size());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = static_cast<size_t>(axis); d < shape.size(); ++d) inner *= shape[d];
  shape.insert(shape.begin() + axis, n);
  Tensor out = Tensor::Empty(items[0].dtype(), shape);
  const size_t row = static_cast<size_t>(inner) * DataTypeSize(out.dtype());
  char* dst = static_cast<char*>(out.raw());
  for (int64_t k = 0; k < n; ++k) {
    const char* src = static_cast<const char*>(items[k].raw());
    for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + (o * n + k) * row, src + o * row, row);
  }
  return out;
}

// [0] followed by the declared shape of body output `id` when it is fully fixed, else [0].
Tensor EmptyScanOutput(const ir::Graph& body, int id) {
  const ir::Value& v = body.values[id];
  Shape shape{0};
  if (v.shape) {
    Shape rest;
    for (const ir::Dim& d : *v.shape) {
      if (!d.fixed()) return Tensor::Empty(v.dtype, {0});
      rest.push_back(d.value);
    }
    shape.insert(shape.end(), rest.begin(), rest.end());
  }
  return Tensor::Empty(v.dtype == DataType::kUndefined ? DataType::kFloat : v.dtype, shape);
}

// Appends one iteration's slice of scan output k; RunError when it differs from the first
// slice in shape or dtype (`step` names the iteration: "iteration 3").
Status AppendScanSlice(const ir::Op& op, size_t k, const std::string& step, Tensor slice,
                       std::vector<Tensor>* slices) {
  if (!slices->empty() &&
      (slice.shape() != (*slices)[0].shape() || slice.dtype() != (*slices)[0].dtype()))
    return op.RunError("scan output " + std::to_string(k) + " is " + DataTypeName(slice.dtype()) +
                       ShapeToString(slice.shape()) + " at " + step + ", after " +
                       DataTypeName((*slices)[0].dtype()) + ShapeToString((*slices)[0].shape()) +
                       "; the iterations must agree");
  slices->push_back(std::move(slice));
  return OkStatus();
}

// A state variable's final value: its own storage, or a copy when no iteration replaced the
// caller's input tensor.
Tensor FinalState(Tensor state, const Tensor& input) {
  return state.raw() == input.raw() ? state.Clone() : state;
}

bool ReadCond(const Tensor& t, bool* value) {
  if (t.dtype() != DataType::kBool || t.numel() != 1) return false;
  *value = t.data<bool>()[0];
  return true;
}

class IfOp final : public ControlFlowOp {
 public:
  using ControlFlowOp::ControlFlowOp;
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    auto op = std::unique_ptr<IfOp>(new IfOp(node));
    if (node.num_explicit_inputs() != 1)
      return ir::AttrError(
          node, "If takes one input (cond); got " + std::to_string(node.num_explicit_inputs()));
    KILN_RETURN_IF_ERROR(op->AddBody(node, "then_branch", 0, 0));
    KILN_RETURN_IF_ERROR(op->AddBody(node, "else_branch", 0, 0));
    for (const Body& b : op->bodies())
      if (b.graph->outputs.size() != node.outputs.size())
        return ir::AttrError(node, "`" + b.attr + "` has " +
                                       std::to_string(b.graph->outputs.size()) +
                                       " outputs, the node " + std::to_string(node.outputs.size()));
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  Status Execute(const ComputeContext& ctx,
                 const std::vector<const BodyRunner*>& runners) const override {
    bool cond = false;
    if (!ctx.has(0) || !ReadCond(ctx.in(0), &cond))
      return RunError("cond must be one bool element; got " +
                      (ctx.has(0) ? std::string(DataTypeName(ctx.in(0).dtype())) +
                                        ShapeToString(ctx.in(0).shape())
                                  : std::string("none")));
    std::vector<Tensor> outs;
    KILN_RETURN_IF_ERROR(runners[cond ? 0 : 1]->Run(Captures(ctx), &outs));
    for (size_t o = 0; o < ctx.outputs.size(); ++o)
      if (ctx.outputs[o] != nullptr) *ctx.outputs[o] = std::move(outs[o]);
    return OkStatus();
  }
};

class LoopOp final : public ControlFlowOp {
 public:
  using ControlFlowOp::ControlFlowOp;
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    auto op = std::unique_ptr<LoopOp>(new LoopOp(node));
    const size_t n_in = node.num_explicit_inputs();
    if (n_in < 2)
      return ir::AttrError(node, "Loop takes M, cond and the carried values; got " +
                                     std::to_string(n_in) + " inputs");
    const size_t carried = n_in - 2;
    KILN_RETURN_IF_ERROR(op->AddBody(node, "body", carried + 2, carried + 1));
    const ir::Graph& body = *op->bodies()[0].graph;
    const size_t scans = body.outputs.size() - 1 - carried;
    if (node.outputs.size() != carried + scans)
      return ir::AttrError(node, "the node has " + std::to_string(node.outputs.size()) +
                                     " outputs; its body gives " + std::to_string(carried) +
                                     " carried values and " + std::to_string(scans) +
                                     " scan outputs");
    op->carried_ = carried;
    op->scans_ = scans;
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  Status Execute(const ComputeContext& ctx,
                 const std::vector<const BodyRunner*>& runners) const override {
    int64_t trip = -1;  // -1: no trip count
    if (ctx.has(0)) {
      const Tensor& m = ctx.in(0);
      if (m.dtype() != DataType::kInt64 || m.numel() != 1)
        return RunError("the trip count M must be one int64 element; got " +
                        std::string(DataTypeName(m.dtype())) + ShapeToString(m.shape()));
      trip = std::max<int64_t>(m.data<int64_t>()[0], 0);
    }
    bool cond = true;
    if (ctx.has(1) && !ReadCond(ctx.in(1), &cond))
      return RunError("cond must be one bool element; got " +
                      std::string(DataTypeName(ctx.in(1).dtype())) +
                      ShapeToString(ctx.in(1).shape()));
    const ir::Graph& body = *bodies()[0].graph;
    std::vector<Tensor> state(carried_);
    for (size_t k = 0; k < carried_; ++k) {
      if (!ctx.has(2 + k))
        return RunError("loop-carried input " + std::to_string(k) + " is missing");
      state[k] = ctx.in(2 + k);  // read only; replaced by the body's outputs
    }
    std::vector<std::vector<Tensor>> scan(scans_);
    const std::vector<const Tensor*> captures = Captures(ctx);
    const int64_t limit = LoopMaxIterations();
    Tensor iter = Tensor::Empty(DataType::kInt64, {});
    Tensor cond_in = Tensor::Empty(DataType::kBool, {});
    std::vector<const Tensor*> inputs(2 + carried_ + captures.size());
    std::vector<Tensor> outs;
    for (int64_t i = 0; (trip < 0 || i < trip) && cond; ++i) {
      if (i >= limit)
        return RunError("stopped after " + std::to_string(limit) +
                        " iterations (the limit; set KILN_LOOP_MAX_ITERATIONS to change it)" +
                        (trip < 0 ? ", the loop has no trip count"
                                  : ", of a trip count of " + std::to_string(trip)));
      iter.data<int64_t>()[0] = i;
      cond_in.data<bool>()[0] = cond;
      inputs[0] = &iter;
      inputs[1] = &cond_in;
      for (size_t k = 0; k < carried_; ++k) inputs[2 + k] = &state[k];
      for (size_t k = 0; k < captures.size(); ++k) inputs[2 + carried_ + k] = captures[k];
      KILN_RETURN_IF_ERROR(runners[0]->Run(inputs, &outs));
      if (!ReadCond(outs[0], &cond))
        return RunError("the body's cond output must be one bool element; got " +
                        std::string(DataTypeName(outs[0].dtype())) +
                        ShapeToString(outs[0].shape()) + " at iteration " + std::to_string(i));
      for (size_t k = 0; k < carried_; ++k) {
        if (outs[1 + k].dtype() != state[k].dtype())
          return RunError("loop-carried value " + std::to_string(k) + " changes dtype from " +
                          DataTypeName(state[k].dtype()) + " to " +
                          DataTypeName(outs[1 + k].dtype()) + " at iteration " + std::to_string(i));
        state[k] = std::move(outs[1 + k]);
      }
      for (size_t k = 0; k < scans_; ++k)
        KILN_RETURN_IF_ERROR(AppendScanSlice(*this, k, "iteration " + std::to_string(i),
                                             std::move(outs[1 + carried_ + k]), &scan[k]));
    }
    for (size_t k = 0; k < carried_; ++k)
      if (ctx.outputs[k] != nullptr)
        *ctx.outputs[k] = FinalState(std::move(state[k]), ctx.in(2 + k));
    for (size_t k = 0; k < scans_; ++k) {
      Tensor* out = ctx.outputs[carried_ + k];
      if (out == nullptr) continue;
      *out = scan[k].empty() ? EmptyScanOutput(body, body.outputs[1 + carried_ + k])
                             : StackAlong(scan[k], 0);
    }
    return OkStatus();
  }

 private:
  size_t carried_ = 0, scans_ = 0;
};

class ScanOp final : public ControlFlowOp {
 public:
  using ControlFlowOp::ControlFlowOp;
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    auto op = std::unique_ptr<ScanOp>(new ScanOp(node));
    if (node.opset < 9)
      return ir::AttrError(node,
                           "Scan-8 (batch axis and sequence_lens) is not supported; "
                           "opset 9 and later are");
    const int64_t m = node.GetInt("num_scan_inputs", -1);
    const size_t n_in = node.num_explicit_inputs();
    if (m < 1 || static_cast<size_t>(m) > n_in)
      return ir::AttrError(node, "num_scan_inputs must be in [1, " + std::to_string(n_in) +
                                     "]; got " + std::to_string(m));
    op->m_ = static_cast<size_t>(m);
    op->n_ = n_in - op->m_;
    KILN_RETURN_IF_ERROR(op->AddBody(node, "body", n_in, op->n_));
    const ir::Graph& body = *op->bodies()[0].graph;
    op->k_ = body.outputs.size() - op->n_;
    if (node.outputs.size() != op->n_ + op->k_)
      return ir::AttrError(node, "the node has " + std::to_string(node.outputs.size()) +
                                     " outputs; its body gives " + std::to_string(op->n_) +
                                     " states and " + std::to_string(op->k_) + " scan outputs");
    auto list = [&](const char* name, size_t count, std::vector<int64_t>* out) -> Status {
      *out = node.GetInts(name, std::vector<int64_t>(count, 0));
      if (out->size() != count)
        return ir::AttrError(node, std::string(name) + " must have " + std::to_string(count) +
                                       " entries; got " + std::to_string(out->size()));
      return OkStatus();
    };
    KILN_RETURN_IF_ERROR(list("scan_input_directions", op->m_, &op->in_dirs_));
    KILN_RETURN_IF_ERROR(list("scan_input_axes", op->m_, &op->in_axes_));
    KILN_RETURN_IF_ERROR(list("scan_output_directions", op->k_, &op->out_dirs_));
    KILN_RETURN_IF_ERROR(list("scan_output_axes", op->k_, &op->out_axes_));
    for (auto* dirs : {&op->in_dirs_, &op->out_dirs_})
      for (int64_t d : *dirs)
        if (d != 0 && d != 1)
          return ir::AttrError(node, "scan directions must be 0 or 1; got " + std::to_string(d));
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  Status Execute(const ComputeContext& ctx,
                 const std::vector<const BodyRunner*>& runners) const override {
    std::vector<int64_t> axes(m_);
    int64_t length = -1;
    for (size_t j = 0; j < m_; ++j) {
      if (!ctx.has(n_ + j)) return RunError("scan input " + std::to_string(j) + " is missing");
      const Tensor& x = ctx.in(n_ + j);
      auto axis = NormalizeAxis(in_axes_[j], x.rank());
      if (!axis.ok())
        return RunError("scan_input_axes[" + std::to_string(j) + "]: " + axis.status().message());
      axes[j] = *axis;
      const int64_t len = x.shape()[axes[j]];
      if (length >= 0 && len != length)
        return RunError("scan inputs must have one sequence length; got " + std::to_string(length) +
                        " and " + std::to_string(len));
      length = len;
    }
    std::vector<Tensor> state(n_);
    for (size_t k = 0; k < n_; ++k) {
      if (!ctx.has(k)) return RunError("state input " + std::to_string(k) + " is missing");
      state[k] = ctx.in(k);
    }
    const std::vector<const Tensor*> captures = Captures(ctx);
    std::vector<std::vector<Tensor>> scan(k_);
    std::vector<Tensor> slices(m_), outs;
    std::vector<const Tensor*> inputs(n_ + m_ + captures.size());
    for (int64_t t = 0; t < length; ++t) {
      for (size_t j = 0; j < m_; ++j)
        slices[j] = SliceAlong(ctx.in(n_ + j), axes[j], in_dirs_[j] ? length - 1 - t : t);
      for (size_t k = 0; k < n_; ++k) inputs[k] = &state[k];
      for (size_t j = 0; j < m_; ++j) inputs[n_ + j] = &slices[j];
      for (size_t k = 0; k < captures.size(); ++k) inputs[n_ + m_ + k] = captures[k];
      KILN_RETURN_IF_ERROR(runners[0]->Run(inputs, &outs));
      for (size_t k = 0; k < n_; ++k) state[k] = std::move(outs[k]);
      for (size_t k = 0; k < k_; ++k)
        KILN_RETURN_IF_ERROR(AppendScanSlice(*this, k, "step " + std::to_string(t),
                                             std::move(outs[n_ + k]), &scan[k]));
    }
    for (size_t k = 0; k < n_; ++k)
      if (ctx.outputs[k] != nullptr) *ctx.outputs[k] = FinalState(std::move(state[k]), ctx.in(k));
    const ir::Graph& body = *bodies()[0].graph;
    for (size_t k = 0; k < k_; ++k) {
      Tensor* out = ctx.outputs[n_ + k];
      if (out == nullptr) continue;
      if (scan[k].empty()) {
        *out = EmptyScanOutput(body, body.outputs[n_ + k]);
        continue;
      }
      if (out_dirs_[k]) std::reverse(scan[k].begin(), scan[k].end());
      auto axis = NormalizeAxis(out_axes_[k], scan[k][0].rank() + 1);
      if (!axis.ok())
        return RunError("scan_output_axes[" + std::to_string(k) + "]: " + axis.status().message());
      *out = StackAlong(scan[k], *axis);
    }
    return OkStatus();
  }

 private:
  size_t n_ = 0, m_ = 0, k_ = 0;
  std::vector<int64_t> in_dirs_, in_axes_, out_dirs_, out_axes_;
};

KILN_REGISTER_OP("If", 1, ir::kMaxOpset, &IfOp::Create);
KILN_REGISTER_OP("Loop", 1, ir::kMaxOpset, &LoopOp::Create);
KILN_REGISTER_OP("Scan", 8, ir::kMaxOpset, &ScanOp::Create);

}  // namespace
}  // namespace kiln::ops
