// ONNX-level work of the INT8 quantizer (src/quant/): finding the nodes it can quantize, adding
// calibration outputs, and writing the quantized model in the standard QDQ form
// (QuantizeLinear -> DequantizeLinear around float ops), which ONNX Runtime and OpenVINO run too.
// Works on serialized ModelProtos; the only quantizer code that sees ONNX's generated headers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln::onnxio {

// A Conv, Gemm or MatMul node of the main graph: its activation input and float weight.
struct QdqCandidate {
  std::string node;  // the node's name ("<op_type>_<index>" when it has none)
  std::string op_type;
  int index = 0;           // position in the graph's (topologically sorted) node list
  std::string activation;  // input 0, a float tensor computed at run time or a graph input
  std::string output;      // output 0
  std::string weight;      // the weight initializer
  int weight_axis = 0;     // the weight's output-channel axis (per-channel scales run along it)
  bool depthwise = false;  // a Conv with one input channel per group and one output per group
  std::string reason;      // non-empty when the node cannot be quantized: why
};

// A Concat or MaxPool of the main graph, for shared scales: its inputs, and who reads its
// output. Either passes values through unchanged (MaxPool picks one), so quantizing its inputs
// with its output's scale gives the readers the same values.
struct QdqConcat {
  std::string node;
  std::string op_type = "Concat";  // or "MaxPool" (one output: no indices)
  // MaxPool: the Conv node that writes its input, directly or through a Relu, when the MaxPool is
  // that input's only reader ("" otherwise).
  std::string conv;
  std::string output;
  std::vector<std::string> inputs;
  bool constant_input = false;  // an input is an initializer (or empty)
  bool graph_output = false;    // the output is also a graph output
  // (node name, input index) of every reader of the output.
  std::vector<std::pair<std::string, int>> readers;
};

// An Add of the main graph whose two inputs are computed tensors (a residual sum), for int8
// residual streams: both inputs quantized, so the convolution writing one of them and the sum
// run in 8 bits (fuse_qdq_add, fuse_qconv_add).
struct QdqAdd {
  std::string node;
  std::vector<std::string> inputs;  // the two summands
  // What carries the sum on: the Add's output, or the output of the Relu that alone reads it.
  std::string result;
  bool graph_output = false;  // the Add's (or that Relu's) output is also a graph output
};

struct QdqModelInfo {
  int64_t opset = 0;  // ai.onnx opset import
  std::vector<QdqCandidate> candidates;
  std::vector<QdqConcat> concats;  // none when the graph has subgraphs
  std::vector<QdqAdd> adds;        // none when the graph has subgraphs
};

StatusOr<QdqModelInfo> InspectForQdq(const std::string& model_bytes);

// The model with `names` appended to its graph outputs (as float tensors of unknown shape), so
// a session returns them: the calibration model.
StatusOr<std::string> WithExtraOutputs(const std::string& model_bytes,
                                       const std::vector<std::string>& names);

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
  // Concat and MaxPool nodes (QdqConcat::node) whose inputs get the scale and zero point of
  // their output's activation (planned, per tensor): each input is quantized with them before
  // the node, which then joins or pools values on one grid (runtimes do it on the 8-bit values;
  // fuse_qdq_add does).
  std::vector<std::string> shared_concats;
  // Add nodes (QdqAdd::node) whose two inputs are quantized (each with its planned activation).
  std::vector<std::string> adds;
};

// Weight quantization as RewriteQdq does it (shared with tests): symmetric int8, scale per channel
// along `axis` (or one when `channels` is 1) = max |w| / 127, or 1 for an all-zero channel.
void QuantizeWeightsSymmetric(const float* w, int64_t n, int64_t channels, int64_t inner,
                              std::vector<int8_t>* q, std::vector<float>* scales);

// Inserts Q -> DQ after each planned activation (feeding only the planned nodes; other consumers
// keep the float tensor) and replaces each planned node's weight by an int8 initializer and a
// DequantizeLinear, and quantizes the inputs of each shared Concat and planned Add. Biases stay
// float. `model_dir` anchors external data of the input model; the output embeds what it rewrote.
// Returns the serialized model.
StatusOr<std::string> RewriteQdq(const std::string& model_bytes, const std::string& model_dir,
                                 const QdqPlan& plan);

}  // namespace kiln::onnxio
