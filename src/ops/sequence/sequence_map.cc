// SequenceMap (17): the `body` graph applied to each item of input_sequence.
//
// Inputs: input_sequence, then additional inputs, each a sequence (of input_sequence's length,
// iterated in step with it) or a tensor (passed whole to every iteration). The body has one formal
// input per node input (tensors: the items) and M outputs, tensors; the node's M outputs are
// sequences, output k holding the body's output k of each iteration in order. Each output's items
// must keep one dtype; with an empty input_sequence the outputs are empty sequences of the body's
// declared output types (float32 where undeclared).
//
// A control-flow op (ops/control/control_flow.h): its body may capture values of the enclosing
// graph (implicit inputs), its reference kernel runs the body with the Interpreter, and the
// semantics live in Execute. Only If, Loop and Scan have a CPU sub-plan kernel
// (backends/cpu/control_flow.cc, registered by op name), so SequenceMap runs on this reference
// kernel on every backend.
#include <memory>

#include "ops/common.h"
#include "ops/control/case_body.h"
#include "ops/control/control_flow.h"
#include "ops/op_cases.h"
#include "ops/sequence/sequence_util.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::Node;

class SequenceMapOp final : public ControlFlowOp {
 public:
  using ControlFlowOp::ControlFlowOp;
  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    auto op = std::unique_ptr<SequenceMapOp>(new SequenceMapOp(node));
    const size_t n_in = node.num_explicit_inputs();
    if (n_in < 1 || node.inputs[0] < 0)
      return ir::AttrError(node, "SequenceMap takes input_sequence; got none");
    for (size_t i = 1; i < n_in; ++i)
      if (node.inputs[i] < 0)
        return ir::AttrError(node, "additional input " + std::to_string(i) +
                                       " is omitted; SequenceMap's inputs are all required");
    KILN_RETURN_IF_ERROR(op->AddBody(node, "body", n_in, 1));
    const ir::Graph& body = *op->bodies()[0].graph;
    if (body.outputs.size() != node.outputs.size())
      return ir::AttrError(node, "`body` has " + std::to_string(body.outputs.size()) +
                                     " outputs, the node " + std::to_string(node.outputs.size()));
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  Status Infer(ir::InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(seq::ExpectSequenceInput(ctx, 0, "input_sequence"));
    const ir::Graph& body = *bodies()[0].graph;
    for (size_t o = 0; o < ctx.num_outputs(); ++o) {
      const DataType t = body.values[body.outputs[o]].dtype;
      ctx.SetOutput(o, SequenceOf(t == DataType::kUndefined ? DataType::kFloat : t), {});
    }
    return OkStatus();
  }

  Status Execute(const ComputeContext& ctx,
                 const std::vector<const BodyRunner*>& runners) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* s, seq::SequenceInput(*this, ctx, 0, "input_sequence"));
    const size_t n = s->items().size();
    for (size_t i = 1; i < explicit_inputs_; ++i) {
      if (!ctx.has(i)) return RunError("additional input " + std::to_string(i) + " is missing");
      const Tensor& x = ctx.in(i);
      if (IsOptionalType(x.dtype()) || !x.defined())
        return RunError("additional input " + std::to_string(i) +
                        " must be a tensor or a sequence; got " + seq::Describe(x));
      if (IsSequenceType(x.dtype()) && x.items().size() != n)
        return RunError("additional sequence input " + std::to_string(i) + " has " +
                        std::to_string(x.items().size()) + " items, input_sequence " +
                        std::to_string(n) + "; they must have one length");
    }
    const std::vector<const Tensor*> captures = Captures(ctx);
    const size_t m = ctx.outputs.size();
    std::vector<std::vector<Tensor>> results(m);
    std::vector<const Tensor*> inputs(explicit_inputs_ + captures.size());
    std::vector<Tensor> outs;
    for (size_t it = 0; it < n; ++it) {
      inputs[0] = &s->items()[it];
      for (size_t i = 1; i < explicit_inputs_; ++i) {
        const Tensor& x = ctx.in(i);
        inputs[i] = IsSequenceType(x.dtype()) ? &x.items()[it] : &x;
      }
      for (size_t k = 0; k < captures.size(); ++k) inputs[explicit_inputs_ + k] = captures[k];
      KILN_RETURN_IF_ERROR(runners[0]->Run(inputs, &outs));
      if (outs.size() != m)
        return RunError("the body gave " + std::to_string(outs.size()) + " outputs; the node has " +
                        std::to_string(m));
      for (size_t k = 0; k < m; ++k) {
        if (!seq::IsTensorType(outs[k].dtype()))
          return RunError("body output " + std::to_string(k) + " must be a tensor; got " +
                          seq::Describe(outs[k]) + " at iteration " + std::to_string(it));
        if (!results[k].empty() && outs[k].dtype() != results[k][0].dtype())
          return RunError("body output " + std::to_string(k) + " is " +
                          DataTypeName(outs[k].dtype()) + " at iteration " + std::to_string(it) +
                          ", " + DataTypeName(results[k][0].dtype()) +
                          " before; a sequence holds one dtype");
        results[k].push_back(std::move(outs[k]));
      }
    }
    const ir::Graph& body = *bodies()[0].graph;
    for (size_t k = 0; k < m; ++k) {
      if (ctx.outputs[k] == nullptr) continue;
      DataType elem = body.values[body.outputs[k]].dtype;
      if (!results[k].empty()) elem = results[k][0].dtype();
      if (!seq::IsTensorType(elem)) elem = DataType::kFloat;
      *ctx.outputs[k] = Tensor::Sequence(elem, std::move(results[k]));
    }
    return OkStatus();
  }
};

KILN_REGISTER_OP("SequenceMap", 17, ir::kMaxOpset, &SequenceMapOp::Create);

// ---- Cases: bodies built by hand ----

Tensor Items(uint32_t seed, const std::vector<Shape>& shapes) {
  std::vector<Tensor> items;
  for (const Shape& s : shapes) items.push_back(CaseTensor(s, seed++));
  return Tensor::Sequence(DataType::kFloat, std::move(items));
}

std::vector<OpCase> SequenceMapCases() {
  std::vector<OpCase> cases;
  {  // x -> (x + y, Shape(x)) with y a tensor passed whole
    CaseBody b(17);
    b.Input("x", DataType::kFloat).Input("y", DataType::kFloat);
    b.Node("Add", {"x", "y"}, "sum").Node("Shape", {"x"}, "shape");
    b.Output("sum", DataType::kFloat).Output("shape", DataType::kInt64);
    OpCase c("one sequence and one tensor, two outputs", 17);
    c.In(Items(981, {{2, 3}, {4, 3}, {1, 3}})).In(CaseTensor({3}, 985)).Outputs(2);
    c.attrs["body"] = b.Attr();
    cases.push_back(std::move(c));
  }
  {  // two sequences in step
    CaseBody b(17);
    b.Input("x", DataType::kFloat).Input("y", DataType::kFloat);
    b.Node("Mul", {"x", "y"}, "p").Output("p", DataType::kFloat);
    OpCase c("two sequences in step", 17);
    c.In(Items(986, {{2}, {3, 1}})).In(Items(988, {{2}, {3, 4}}));
    c.attrs["body"] = b.Attr();
    cases.push_back(std::move(c));
  }
  {  // empty sequence: empty int64 output from the body's declared type
    CaseBody b(17);
    b.Input("x", DataType::kFloat).Node("Shape", {"x"}, "s").Output("s", DataType::kInt64);
    OpCase c("empty input_sequence", 17);
    c.In(Tensor::Sequence(DataType::kFloat, {}));
    c.attrs["body"] = b.Attr();
    cases.push_back(std::move(c));
  }
  return cases;
}
KILN_REGISTER_OP_CASES("", "SequenceMap", &SequenceMapCases);

}  // namespace
}  // namespace kiln::ops
