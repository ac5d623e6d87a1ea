// The node evaluator (see evaluate.h).
#include "ir/evaluate.h"

#include "core/shape_span.h"

namespace kiln::ir {

bool NodeInputs::AllValues() const {
  for (size_t i = 0; i < dtypes.size(); ++i)
    if (dtypes[i] != DataType::kUndefined && values[i] == nullptr) return false;
  return true;
}

int64_t NodeInputs::Elements() const {
  int64_t n = 0;
  for (size_t i = 0; i < dtypes.size(); ++i)
    if (dtypes[i] != DataType::kUndefined) n += NumElements(shapes[i]);
  return n;
}

size_t NodeInputs::Bytes() const {
  size_t n = 0;
  for (size_t i = 0; i < dtypes.size(); ++i)
    if (dtypes[i] != DataType::kUndefined)
      n += static_cast<size_t>(NumElements(shapes[i])) * DataTypeSize(dtypes[i]);
  return n;
}

bool NeedsRuntimeValues(const Node& node, const Op& op, const NodeInputs& in) {
  if (op.ShapesFromRun()) return !in.AllValues();
  for (int si : op.ShapeInputs())
    if (node.HasInput(si) && (static_cast<size_t>(si) >= in.values.size() || !in.values[si]))
      return true;
  return false;
}

namespace {

// Every input and output shape within kMaxShapeSpan (core/shape_span.h), so no kernel's size
// arithmetic on them overflows. Inputs are checked too: a control-flow kernel makes its outputs
// without the evaluator.
Status CheckSpans(const Node& node, const NodeInputs& in, const std::vector<Shape>& outs) {
  auto refuse = [&](const char* kind, size_t i, const Shape& s) {
    return InvalidModel("failed to infer shapes of " + node.Describe() + ": " + kind + " " +
                        std::to_string(i) + " has shape " + ShapeToString(s) +
                        ", whose dims (zeros counted as 1) multiply past 2^48");
  };
  for (size_t i = 0; i < in.shapes.size(); ++i)
    if (in.dtypes[i] != DataType::kUndefined && !ShapeSpanFits(in.shapes[i]))
      return refuse("input", i, in.shapes[i]);
  for (size_t o = 0; o < outs.size() && o < node.outputs.size(); ++o)
    if (node.outputs[o] >= 0 && !ShapeSpanFits(outs[o])) return refuse("output", o, outs[o]);
  return OkStatus();
}

// Control flow: nothing is known before the node runs; it runs only when every input is known and
// the policy sets no limits (the limits cannot be checked ahead of running a subgraph).
Status EvaluateByRunning(const Node& node, const Op& op, const NodeInputs& in,
                         const EvalPolicy& policy, NodeEvaluation* out) {
  const bool limited = policy.max_input_elements >= 0 || policy.max_output_elements >= 0 ||
                       policy.max_growth_bytes >= 0;
  if (!policy.compute || limited || !in.AllValues())
    return Unsupported(node.Describe() + ": its output shapes are known only by running it");
  const size_t n = node.outputs.size();
  std::vector<Tensor> outs(n);
  ComputeContext cc;
  cc.inputs = in.values;
  for (size_t o = 0; o < n; ++o) cc.outputs.push_back(node.outputs[o] < 0 ? nullptr : &outs[o]);
  KILN_RETURN_IF_ERROR(op.Compute(cc));
  out->dtypes.assign(n, DataType::kUndefined);
  out->shapes.assign(n, Shape{});
  for (size_t o = 0; o < n; ++o) {
    if (node.outputs[o] < 0) continue;
    if (!outs[o].defined())
      return Internal(node.Describe() + ": output " + std::to_string(o) + " was not produced");
    out->dtypes[o] = outs[o].dtype();
    out->shapes[o] = outs[o].shape();
  }
  out->values = std::move(outs);
  out->all_values = true;
  out->computed = true;
  return OkStatus();
}

}  // namespace

Status CheckValueKinds(const Node& node, const Op& op, const std::vector<DataType>& dtypes) {
  if (op.TakesNonPlainValues()) return OkStatus();
  for (size_t i = 0; i < dtypes.size(); ++i)
    if (dtypes[i] != DataType::kUndefined && !IsPlainDataType(dtypes[i]))
      return Unsupported("failed to run " + node.Describe() + ": input " + std::to_string(i) +
                         " is a " + DataTypeName(dtypes[i]) + " value, which kiln's " +
                         node.op_type +
                         " does not take (strings, sequences and optionals reach only the ops "
                         "made for them)");
  return OkStatus();
}

Status EvaluateNode(const Node& node, const Op& op, const NodeInputs& in, const EvalPolicy& policy,
                    NodeEvaluation* out) {
  KILN_RETURN_IF_ERROR(CheckValueKinds(node, op, in.dtypes));
  KILN_RETURN_IF_ERROR(CheckSpans(node, in, {}));
  if (op.ShapesFromRun()) return EvaluateByRunning(node, op, in, policy, out);
  InferContext ctx(node, in.dtypes, in.shapes, in.values);
  KILN_RETURN_IF_ERROR(op.Infer(ctx));
  if (!op.TakesNonPlainValues())
    for (size_t o = 0; o < ctx.out_dtypes().size(); ++o)
      if (ctx.out_dtypes()[o] != DataType::kUndefined && !IsPlainDataType(ctx.out_dtypes()[o]))
        return Unsupported("failed to run " + node.Describe() + ": output " + std::to_string(o) +
                           " would be a " + DataTypeName(ctx.out_dtypes()[o]) +
                           " value, which kiln's " + node.op_type + " does not make");
  KILN_RETURN_IF_ERROR(CheckSpans(node, NodeInputs{}, ctx.out_shapes()));
  const size_t n = node.outputs.size();
  out->dtypes = ctx.out_dtypes();
  out->shapes = ctx.out_shapes();
  out->values.assign(n, Tensor());
  out->computed = false;
  out->all_values = true;
  int64_t out_elements = 0;
  size_t out_bytes = 0;
  bool sized = true;  // every output to compute has a fixed-size dtype
  for (size_t o = 0; o < n; ++o) {
    if (node.outputs[o] < 0) continue;
    if (ctx.out_values()[o].defined()) {
      out->values[o] = ctx.out_values()[o];
      continue;
    }
    out->all_values = false;
    const size_t size = DataTypeSize(out->dtypes[o]);
    if (size == 0) sized = false;
    out_elements += NumElements(out->shapes[o]);
    out_bytes += static_cast<size_t>(NumElements(out->shapes[o])) * size;
  }
  // Outputs without a fixed element size (strings, sequences, optionals) are computed only
  // under no size limits: the limits cannot be checked for them.
  const bool limited = policy.max_input_elements >= 0 || policy.max_output_elements >= 0 ||
                       policy.max_growth_bytes >= 0;
  if (out->all_values || !policy.compute || (!sized && limited) || !in.AllValues())
    return OkStatus();
  if (!op.Deterministic() && !policy.run_nondeterministic) return OkStatus();  // never folded
  if (policy.max_input_elements >= 0 && in.Elements() > policy.max_input_elements)
    return OkStatus();
  if (policy.max_output_elements >= 0 && out_elements > policy.max_output_elements)
    return OkStatus();
  if (policy.max_growth_bytes >= 0 &&
      out_bytes > in.Bytes() + static_cast<size_t>(policy.max_growth_bytes))
    return OkStatus();
  ComputeContext cc;
  cc.inputs = in.values;
  std::vector<Tensor> outs(n);
  for (size_t o = 0; o < n; ++o) {
    if (node.outputs[o] < 0) {
      cc.outputs.push_back(nullptr);
      continue;
    }
    outs[o] =
        out->values[o].defined() ? out->values[o] : Tensor::Empty(out->dtypes[o], out->shapes[o]);
    cc.outputs.push_back(&outs[o]);
  }
  Status s = op.Compute(cc);
  if (!s.ok()) return s.AddContext("while folding constants");
  for (size_t o = 0; o < n; ++o)
    if (node.outputs[o] >= 0) out->values[o] = std::move(outs[o]);
  out->all_values = true;
  out->computed = true;
  return OkStatus();
}

}  // namespace kiln::ir
