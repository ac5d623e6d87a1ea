// The graph work of the INT8 quantizer (kiln/quantize.h), on kiln's IR: finding the nodes it can
// quantize, the calibration and bias-correction graphs, and the rewrite into the standard QDQ form
// (QuantizeLinear -> DequantizeLinear around float ops, which ONNX Runtime and OpenVINO run too).
// The quantizer loads the model once (onnx/onnx_loader.h), runs sessions on these graphs directly
// and serializes only the model it writes (onnx/onnx_writer.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/status.h"

namespace kiln::quant {

// Constant nodes that hold a tensor (`value`) become constants of the same name: exporters such
// as Paddle2ONNX write every weight that way, and the quantizer finds weights among constants.
// Node names stay (the loader's), so do the other nodes' order.
Status HoistConstants(ir::Graph* g);

// A Conv, Gemm or MatMul node of the main graph: its activation input and float weight.
struct QdqCandidate {
  std::string node;  // the node's name ("<op_type>_<index>" when it has none)
  std::string op_type;
  int index = 0;           // position in the graph's (topologically sorted) node list
  std::string activation;  // input 0, a float tensor computed at run time or a graph input
  std::string output;      // output 0
  // A Conv's: the output of the activation that alone reads its output (QdqConcat::sources
  // names them), or "".
  std::string activated;
  std::string weight;      // the weight (a constant)
  int weight_axis = 0;     // the weight's output-channel axis (per-channel scales run along it)
  bool depthwise = false;  // a Conv with one input channel per group and one output per group
  // An input layer: a graph input reaches its activation through nodes that are no quantizable
  // candidates (`reason` empty). An output layer: its output reaches a graph output that way (a
  // classifier, each head of a detector). Both false when the graph has subgraphs.
  bool input_layer = false, output_layer = false;
  std::string reason;  // non-empty when the node cannot be quantized: why
};

// A Concat or a pass-through op of the main graph, for shared scales: its data inputs, and who
// reads its outputs. Each passes values through unchanged (Concat joins them, MaxPool picks one
// per window, Split, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Slice, DepthToSpace and
// SpaceToDepth move or pick them, Resize and Upsample in mode nearest copy them), so quantizing its
// data inputs with its outputs' scale gives the readers the same values, and a runtime can do the
// op on the 8-bit values.
struct QdqConcat {
  std::string node;
  // "Concat" (every input is data) or one of kPassThroughOps (input 0 is data; the others, shapes
  // and scales, are not quantized).
  std::string op_type = "Concat";
  std::string output;                // output 0
  std::vector<std::string> outputs;  // every output (Split has several)
  std::vector<std::string> inputs;   // the data inputs
  // Per data input, what writes it: a Conv node (directly, or through an activation that alone
  // reads the Conv's output: Relu, Clip, LeakyRelu, HardSwish, HardSigmoid, Sigmoid, Tanh, or
  // SiLU as x * Sigmoid(x)), a residual Add (QdqAdd::node, its result), a node listed here, or
  // "" (a graph input, another op).
  std::vector<std::string> sources;
  bool constant_input = false;      // a data input is a constant (or empty)
  bool graph_output = false;        // an output is also a graph output
  bool input_graph_output = false;  // a data input is also a graph output
  // (node name, input index) of every reader of the outputs, and of the data inputs (this node
  // included); Shape and Size nodes, which read only the shape, are left out.
  std::vector<std::pair<std::string, int>> readers, input_readers;
};

// The ops QdqConcat lists besides Concat.
inline constexpr const char* kPassThroughOps[] = {
    "MaxPool", "Split",     "Resize",    "Upsample", "Reshape",      "Flatten",
    "Squeeze", "Unsqueeze", "Transpose", "Slice",    "DepthToSpace", "SpaceToDepth"};

// Ops QdqConcat also lists, which do not pass values through but average them: each output
// value lies within the range of its inputs, so the output can share the input's scale (ONNX
// Runtime's and OpenVINO's rule for AveragePool) and a runtime can average the 8-bit values and
// round once (kiln's QAveragePool). Not exact: the mean is rounded to the grid again, as it would
// be for any quantized reader. GlobalAveragePool is not listed: its output feeds a classifier,
// whose input loses resolution on its input's wider scale (the MobileNetV2-style Fashion-MNIST
// net, all int8: 91.70 % shared against 91.78 % apart), for one small pass saved.
inline constexpr const char* kAveragingOps[] = {"AveragePool"};
inline bool IsAveragingOp(const std::string& op) {
  for (const char* a : kAveragingOps)
    if (op == a) return true;
  return false;
}

// An Add of the main graph whose two inputs are computed tensors (a residual sum), for int8
// residual streams: both inputs quantized, so the convolution writing one of them and the sum
// run in 8 bits (fuse_qdq_add, fuse_qconv_add).
struct QdqAdd {
  std::string node;
  std::vector<std::string> inputs;  // the two summands
  // What carries the sum on: the Add's output, or the output of the Relu that alone reads it.
  std::string result;
  bool graph_output = false;  // the Add's (or that Relu's) output is also a graph output
  std::vector<std::string> result_readers;  // the nodes reading `result`
};

struct QdqModelInfo {
  int64_t opset = 0;  // ai.onnx opset import
  std::vector<QdqCandidate> candidates;
  std::vector<QdqConcat>
      concats;               // Concats and pass-through ops; none when the graph has subgraphs
  std::vector<QdqAdd> adds;  // none when the graph has subgraphs
};

// What the quantizer can do with the main graph of `g` (after HoistConstants).
QdqModelInfo InspectForQdq(const ir::Graph& g);

// Appends `names` (existing values) to the graph outputs, each once: the calibration graph, whose
// session returns them. InvalidArgument for a name the graph lacks.
Status AddOutputs(ir::Graph* g, const std::vector<std::string>& names);

// Adds a copy of each Conv node named in `nodes` (QdqCandidate::node), reading the same inputs,
// named and writing output 0 as the original's plus `suffix`; both outputs appended to the graph
// outputs. Quantizing only the copies (RewriteQdq with a plan naming them) gives, per
// convolution, its float output and its int8 output on the same float input: the error of the
// layer alone, for bias correction.
Status AddIsolatedCopies(ir::Graph* g, const std::vector<std::string>& nodes,
                         const std::string& suffix);

struct ActivationQuant {
  std::string tensor;
  float scale = 1.f;
  int32_t zero_point = 0;
  bool is_signed = false;  // int8 (else uint8)
  // Non-empty: one scale per channel (axis 1; zero points 0), which needs opset 13.
  std::vector<float> channel_scales;
};

struct QdqPlan {
  std::vector<ActivationQuant> activations;  // each quantized node's activation input
  std::vector<std::string> nodes;            // QdqCandidate::node of the nodes to quantize
  // Weights: symmetric int8 per output channel (needs opset 13); false: one scale per tensor.
  bool per_channel = true;
  // Bias correction: per planned Conv node, a value per output channel added to its bias (a bias
  // is created when the node has none).
  std::map<std::string, std::vector<float>> bias_shift;
  // Concat and pass-through nodes (QdqConcat::node) whose data inputs get the scale and zero
  // point of their output's activation (planned, per tensor): each data input is quantized with
  // them before the node, which then joins, pools or moves values on one grid (runtimes do it
  // on the 8-bit values; fuse_qdq_add does).
  std::vector<std::string> shared_concats;
  // Add nodes (QdqAdd::node) whose two inputs are quantized (each with its planned activation).
  std::vector<std::string> adds;
};

// Weight quantization as RewriteQdq does it (shared with tests): symmetric int8, scale per channel
// along `axis` (or one when `channels` is 1) = max |w| / 127, or 1 for an all-zero channel.
void QuantizeWeightsSymmetric(const float* w, int64_t n, int64_t channels, int64_t inner,
                              std::vector<int8_t>* q, std::vector<float>* scales);

// Inserts Q -> DQ after each planned activation (feeding only the planned nodes; other consumers
// keep the float tensor) and replaces each planned node's weight by an int8 constant and a
// DequantizeLinear, and quantizes the inputs of each shared Concat and planned Add. Biases stay
// float. Each Q -> DQ pair follows the node producing its tensor (weights' DequantizeLinear nodes
// and graph inputs' pairs come first), so the node order stays topological; float weights nothing
// reads any more leave the graph.
Status RewriteQdq(ir::Graph* g, const QdqPlan& plan);

}  // namespace kiln::quant
