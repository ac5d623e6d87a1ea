// If (1-24), Loop (1-24) and Scan (8-24): the semantics of control_flow.h, run through BodyRunners.
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
// Scan-8: the same with a batch axis first on every state and scan input (the body sees one
// sample), the sequence on axis 1 of the scan inputs, `directions` for the scan inputs only, and
// the optional `sequence_lens` (int64 [batch]) first: sample b runs sequence_lens[b] steps (a
// reversed input starts at its step sequence_lens[b] - 1) and its scan outputs are zero past them,
// as in ONNX Runtime. If's and Loop's values may be strings, sequences or optionals; a Loop value
// carried as optional(X) may come back from the body as an X (the body then sees it wrapped in
// the optional again); scan outputs must be tensors of fixed-size elements.
#include "ops/control/control_flow.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include "ops/common.h"
#include "ops/control/case_body.h"
#include "ops/op_cases.h"

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
  if (!IsPlainDataType(slice.dtype()))
    return op.RunError("scan output " + std::to_string(k) + " is a " + DataTypeName(slice.dtype()) +
                       " value at " + step + "; scan outputs stack tensors of fixed-size elements");
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
    std::vector<Tensor> outs, wrapped(carried_);
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
      // A carried optional(X) may come back from the body as an X (ONNX's test_loop16_seq_none):
      // the body sees it wrapped in the optional again; the node's output is the X.
      for (size_t k = 0; k < carried_; ++k) {
        inputs[2 + k] = &state[k];
        const DataType declared = ctx.in(2 + k).dtype();
        if (IsOptionalType(declared) && state[k].dtype() == ContainedType(declared)) {
          wrapped[k] = Tensor::Optional(state[k].dtype(), &state[k]);
          inputs[2 + k] = &wrapped[k];
        }
      }
      for (size_t k = 0; k < captures.size(); ++k) inputs[2 + carried_ + k] = captures[k];
      KILN_RETURN_IF_ERROR(runners[0]->Run(inputs, &outs));
      if (!ReadCond(outs[0], &cond))
        return RunError("the body's cond output must be one bool element; got " +
                        std::string(DataTypeName(outs[0].dtype())) +
                        ShapeToString(outs[0].shape()) + " at iteration " + std::to_string(i));
      for (size_t k = 0; k < carried_; ++k) {
        const DataType declared = ctx.in(2 + k).dtype();
        if (outs[1 + k].dtype() != declared &&
            !(IsOptionalType(declared) && outs[1 + k].dtype() == ContainedType(declared)))
          return RunError("loop-carried value " + std::to_string(k) + " changes dtype from " +
                          DataTypeName(declared) + " to " + DataTypeName(outs[1 + k].dtype()) +
                          " at iteration " + std::to_string(i));
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
    op->v8_ = node.opset < 9;
    const int64_t m = node.GetInt("num_scan_inputs", -1);
    // Scan-8's first input is sequence_lens; the body sees the others.
    const size_t first = op->v8_ ? 1 : 0;
    if (node.num_explicit_inputs() < first + 1)
      return ir::AttrError(node, "Scan takes at least one scan input; got none");
    const size_t n_in = node.num_explicit_inputs() - first;
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
    if (op->v8_) {
      KILN_RETURN_IF_ERROR(list("directions", op->m_, &op->in_dirs_));
    } else {
      KILN_RETURN_IF_ERROR(list("scan_input_directions", op->m_, &op->in_dirs_));
      KILN_RETURN_IF_ERROR(list("scan_input_axes", op->m_, &op->in_axes_));
      KILN_RETURN_IF_ERROR(list("scan_output_directions", op->k_, &op->out_dirs_));
      KILN_RETURN_IF_ERROR(list("scan_output_axes", op->k_, &op->out_axes_));
    }
    for (auto* dirs : {&op->in_dirs_, &op->out_dirs_})
      for (int64_t d : *dirs)
        if (d != 0 && d != 1)
          return ir::AttrError(node, "scan directions must be 0 or 1; got " + std::to_string(d));
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  Status Execute(const ComputeContext& ctx,
                 const std::vector<const BodyRunner*>& runners) const override {
    if (v8_) return ExecuteV8(ctx, *runners[0]);
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
  // Scan-8: each sample of the batch scanned on its own (see the file comment).
  Status ExecuteV8(const ComputeContext& ctx, const BodyRunner& runner) const {
    // ctx inputs: sequence_lens, N states, M scan inputs, captures.
    int64_t batch = -1, length = -1;
    for (size_t i = 0; i < n_ + m_; ++i) {
      const bool is_scan = i >= n_;
      const std::string what =
          is_scan ? "scan input " + std::to_string(i - n_) : "state input " + std::to_string(i);
      if (!ctx.has(1 + i)) return RunError(what + " is missing");
      const Tensor& x = ctx.in(1 + i);
      if (x.rank() < (is_scan ? 2 : 1))
        return RunError(what + " is " + ShapeToString(x.shape()) + "; Scan-8 needs a batch axis" +
                        (is_scan ? " and a sequence axis" : ""));
      if (batch >= 0 && x.shape()[0] != batch)
        return RunError(what + " has batch " + std::to_string(x.shape()[0]) +
                        ", the inputs before " + std::to_string(batch));
      batch = x.shape()[0];
      if (!is_scan) continue;
      if (length >= 0 && x.shape()[1] != length)
        return RunError("scan inputs must have one sequence length; got " + std::to_string(length) +
                        " and " + std::to_string(x.shape()[1]));
      length = x.shape()[1];
    }
    std::vector<int64_t> lens(static_cast<size_t>(batch), length);
    if (ctx.has(0)) {
      const Tensor& sl = ctx.in(0);
      if (sl.dtype() != DataType::kInt64 || sl.rank() != 1 || sl.shape()[0] != batch)
        return RunError("sequence_lens must be int64[" + std::to_string(batch) + "]; got " +
                        DataTypeName(sl.dtype()) + ShapeToString(sl.shape()));
      for (int64_t b = 0; b < batch; ++b) {
        lens[b] = sl.data<int64_t>()[b];
        if (lens[b] < 0 || lens[b] > length)
          return RunError("sequence_lens[" + std::to_string(b) + "] is " + std::to_string(lens[b]) +
                          "; it must be in [0, " + std::to_string(length) + "]");
      }
    }
    const std::vector<const Tensor*> captures = Captures(ctx);
    std::vector<std::vector<Tensor>> final_states(n_);       // per state, per sample
    std::vector<std::vector<std::vector<Tensor>>> scan(k_);  // per output, per sample, per step
    for (auto& s : scan) s.resize(static_cast<size_t>(batch));
    std::vector<Tensor> state(n_), sample(m_), slices(m_), outs;
    std::vector<const Tensor*> inputs(n_ + m_ + captures.size());
    for (int64_t b = 0; b < batch; ++b) {
      for (size_t k = 0; k < n_; ++k) state[k] = SliceAlong(ctx.in(1 + k), 0, b);
      for (size_t j = 0; j < m_; ++j) sample[j] = SliceAlong(ctx.in(1 + n_ + j), 0, b);
      const int64_t len = lens[b];
      for (int64_t t = 0; t < len; ++t) {
        for (size_t j = 0; j < m_; ++j)
          slices[j] = SliceAlong(sample[j], 0, in_dirs_[j] ? len - 1 - t : t);
        for (size_t k = 0; k < n_; ++k) inputs[k] = &state[k];
        for (size_t j = 0; j < m_; ++j) inputs[n_ + j] = &slices[j];
        for (size_t k = 0; k < captures.size(); ++k) inputs[n_ + m_ + k] = captures[k];
        KILN_RETURN_IF_ERROR(runner.Run(inputs, &outs));
        for (size_t k = 0; k < n_; ++k) state[k] = std::move(outs[k]);
        for (size_t k = 0; k < k_; ++k)
          KILN_RETURN_IF_ERROR(AppendScanSlice(
              *this, k, "sample " + std::to_string(b) + " step " + std::to_string(t),
              std::move(outs[n_ + k]), &scan[k][b]));
      }
      for (size_t k = 0; k < n_; ++k) {
        if (!final_states[k].empty() && (state[k].shape() != final_states[k][0].shape() ||
                                         state[k].dtype() != final_states[k][0].dtype()))
          return RunError("state " + std::to_string(k) + " is " + DataTypeName(state[k].dtype()) +
                          ShapeToString(state[k].shape()) + " after sample " + std::to_string(b) +
                          ", after sample 0 " + DataTypeName(final_states[k][0].dtype()) +
                          ShapeToString(final_states[k][0].shape()) + "; the samples must agree");
        final_states[k].push_back(std::move(state[k]));
      }
    }
    for (size_t k = 0; k < n_; ++k) {
      if (ctx.outputs[k] == nullptr) continue;
      if (batch == 0) {
        *ctx.outputs[k] = ctx.in(1 + k).Clone();
        continue;
      }
      *ctx.outputs[k] = StackAlong(final_states[k], 0);
    }
    const ir::Graph& body = *bodies()[0].graph;
    for (size_t k = 0; k < k_; ++k) {
      Tensor* out = ctx.outputs[n_ + k];
      if (out == nullptr) continue;
      // A step's slice: from any sample that ran one, else the body's declared shape.
      const Tensor* first = nullptr;
      for (const auto& steps : scan[k])
        if (!steps.empty()) first = &steps[0];
      if (first == nullptr) {
        Tensor declared = EmptyScanOutput(body, body.outputs[n_ + k]);
        if (declared.rank() == 1 && batch * length != 0)
          return RunError("scan output " + std::to_string(k) +
                          ": no step ran (every sequence_lens is 0) and the body does not "
                          "declare its shape");
        Shape shape = declared.shape();
        shape[0] = length;
        shape.insert(shape.begin(), batch);
        *out = Tensor::Empty(declared.dtype(), shape);
        continue;
      }
      const DataType dtype = first->dtype();
      const Shape step_shape = first->shape();
      const Tensor zero = Tensor::Empty(dtype, step_shape);
      std::vector<Tensor> rows;
      for (int64_t b = 0; b < batch; ++b) {
        std::vector<Tensor>& steps = scan[k][b];
        if (!steps.empty() && (steps[0].shape() != step_shape || steps[0].dtype() != dtype))
          return RunError("scan output " + std::to_string(k) + " is " +
                          DataTypeName(steps[0].dtype()) + ShapeToString(steps[0].shape()) +
                          " in sample " + std::to_string(b) + ", " + DataTypeName(dtype) +
                          ShapeToString(step_shape) + " in another; the samples must agree");
        while (static_cast<int64_t>(steps.size()) < length) steps.push_back(zero);
        rows.push_back(StackAlong(steps, 0));
      }
      *out = StackAlong(rows, 0);
    }
    return OkStatus();
  }

  bool v8_ = false;
  size_t n_ = 0, m_ = 0, k_ = 0;
  std::vector<int64_t> in_dirs_, in_axes_, out_dirs_, out_axes_;
};

KILN_REGISTER_OP("If", 1, ir::kMaxOpset, &IfOp::Create);
KILN_REGISTER_OP("Loop", 1, ir::kMaxOpset, &LoopOp::Create);
KILN_REGISTER_OP("Scan", 8, ir::kMaxOpset, &ScanOp::Create);

// Kernel cases (ops/op_cases.h) for cpu.<op>.subplan (bodies planned with the fast kernels)
// against the interpreted bodies. A case node binds no outer values, so bodies read only their
// own inputs and constants (a nested If reads its Loop body's values).
// Their outputs are assigned by the run (ShapesFromRun): the harness compares the tensors the
// reference and the kernel assign.
Tensor CaseBool(bool v) { return CaseInts(DataType::kBool, {}, 1, v ? 1 : 0, v ? 1 : 0); }
Tensor CaseInt64(int64_t v) { return Tensor::FromVector<int64_t>({v}, {}); }

// If-13 both ways: then = a + b, else = (a * a, Relu(b)) with a [2,3] and b [3] body constants.
std::vector<OpCase> IfCases() {
  std::vector<OpCase> cases;
  for (bool cond : {true, false}) {
    CaseBody then_b(13), else_b(13);
    then_b.Constant("a", CaseTensor({2, 3}, 701)).Constant("b", CaseTensor({3}, 702));
    then_b.Node("Add", {"a", "b"}, "t").Node("Sub", {"a", "b"}, "u").Output("t").Output("u");
    else_b.Constant("a", CaseTensor({2, 3}, 703)).Constant("b", CaseTensor({3}, 704));
    else_b.Node("Mul", {"a", "a"}, "e").Node("Relu", {"b"}, "r").Output("e").Output("r");
    OpCase c(std::string("If-13 cond ") + (cond ? "true" : "false") + ", two outputs", 13);
    c.In(CaseBool(cond)).Outputs(2);
    c.attrs["then_branch"] = then_b.Attr();
    c.attrs["else_branch"] = else_b.Attr();
    cases.push_back(std::move(c));
  }
  return cases;
}
KILN_REGISTER_OP_CASES("", "If", &IfCases);

// Loop-13 whose body holds an If on i < 2 reading the body's s and k (captured): s + k for two
// iterations, then s - k (nested sub-plans, a constant capture baked into the branch).
OpCase LoopWithIf() {
  CaseBody add(13), sub(13), body(13);
  add.Capture("s").Capture("k").Node("Add", {"s", "k"}, "a").Output("a");
  sub.Capture("s").Capture("k").Node("Sub", {"s", "k"}, "d").Output("d");
  body.Input("i", DataType::kInt64, {}).Input("cin", DataType::kBool, {});
  body.Input("s", DataType::kFloat, {2, 3}).Constant("k", CaseTensor({3}, 713));
  body.Constant("two", CaseInt64(2)).Node("Less", {"i", "two"}, "early");
  body.Nested("If", "early", "s2", {{"then_branch", add.Attr()}, {"else_branch", sub.Attr()}},
              {"s", "k"});
  body.Node("Identity", {"cin"}, "cout").Output("cout").Output("s2");
  OpCase c("Loop-13 M 4, an If in the body reading captured values", 13);
  c.In(CaseInt64(4)).In(CaseBool(true)).In(CaseTensor({2, 3}, 714));
  c.attrs["body"] = body.Attr();
  return c;
}

// Loop-13 body (i, cond, s) -> (cond', s + k, scan (s + k)^2): a trip count of 3 with cond
// kept, cond turning false at i == 2 (with and without a trip count), and a trip count of 0 (scan
// output [0, 2, 3] from the body's declared shape).
std::vector<OpCase> LoopCases() {
  std::vector<OpCase> cases;
  struct Spec {
    std::string what;
    int64_t trip;  // -1: M omitted
    bool cond_from_i;
  };
  for (const Spec& s : std::vector<Spec>{{"M 3", 3, false},
                                         {"cond i < 2, no M", -1, true},
                                         {"M 5, cond i < 2", 5, true},
                                         {"M 0", 0, false}}) {
    CaseBody body(13);
    body.Input("i", DataType::kInt64, {}).Input("cin", DataType::kBool, {});
    body.Input("s", DataType::kFloat, {2, 3}).Constant("k", CaseTensor({3}, 711));
    body.Constant("two", CaseInt64(2));
    if (s.cond_from_i)
      body.Node("Less", {"i", "two"}, "cout");
    else
      body.Node("Identity", {"cin"}, "cout");
    body.Node("Add", {"s", "k"}, "s2").Node("Mul", {"s2", "s2"}, "scan");
    body.Output("cout").Output("s2").Output("scan", DataType::kFloat, {2, 3});
    OpCase c("Loop-13 " + s.what + ", one carried value [2,3], one scan output", 13);
    if (s.trip >= 0)
      c.In(CaseInt64(s.trip));
    else
      c.Omitted();
    c.In(CaseBool(true)).In(CaseTensor({2, 3}, 712)).Outputs(2);
    c.attrs["body"] = body.Attr();
    cases.push_back(std::move(c));
  }
  cases.push_back(LoopWithIf());
  return cases;
}
KILN_REGISTER_OP_CASES("", "Loop", &LoopCases);

// Scan-11: a running sum over the rows of x (forward, reversed, along axis 1), and Scan-8's
// batch axis.
std::vector<OpCase> ScanCases() {
  std::vector<OpCase> cases;
  for (int variant = 0; variant < 3; ++variant) {
    CaseBody body(11);
    body.Input("acc", DataType::kFloat, {3}).Input("row", DataType::kFloat, {3});
    body.Node("Add", {"acc", "row"}, "acc2").Node("Relu", {"acc2"}, "partial");
    body.Output("acc2").Output("partial");
    const char* what[] = {"forward", "reversed input and output", "input axis 1, output axis 1"};
    OpCase c(std::string("Scan-11 running sum, ") + what[variant], 11);
    c.In(CaseTensor({3}, 721)).In(CaseTensor(variant == 2 ? Shape{3, 5} : Shape{5, 3}, 722));
    c.Int("num_scan_inputs", 1).Outputs(2);
    if (variant == 1) c.Ints("scan_input_directions", {1}).Ints("scan_output_directions", {1});
    if (variant == 2) c.Ints("scan_input_axes", {1}).Ints("scan_output_axes", {1});
    c.attrs["body"] = body.Attr();
    cases.push_back(std::move(c));
  }
  CaseBody body8(8);
  body8.Input("acc", DataType::kFloat, {3}).Input("row", DataType::kFloat, {3});
  body8.Node("Add", {"acc", "row"}, "acc2").Node("Relu", {"acc2"}, "partial");
  body8.Output("acc2").Output("partial");
  OpCase c8("Scan-8 batch 2, sequence 4, no sequence_lens", 8);
  c8.Omitted().In(CaseTensor({2, 3}, 731)).In(CaseTensor({2, 4, 3}, 732));
  c8.Int("num_scan_inputs", 1).Outputs(2);
  c8.attrs["body"] = body8.Attr();
  cases.push_back(std::move(c8));
  return cases;
}
KILN_REGISTER_OP_CASES("", "Scan", &ScanCases);

}  // namespace
}  // namespace kiln::ops
