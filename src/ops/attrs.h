// Typed attribute structs of the ops whose fast kernels need attributes. Each op parses and
// validates its attributes once at load into one of these and returns it from
// ir::Op::attributes(); CPU and CUDA kernels read them with `op.attrs<ConvAttrs>()` instead of
// looking attributes up by name, so an attribute's default and its validation exist once.
// Immutable after load. Which op returns which struct is stated per struct.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "ir/op.h"
#include "ops/activation.h"
#include "ops/nn/conv.h"
#include "ops/nn/spatial.h"

namespace kiln::ops {

// Conv (act kNone) and FusedConv (domain kiln).
struct ConvAttrs : ir::OpAttrs {
  nn::ConvParams conv;
  Activation act;
};

// kiln.QConvAdd: QConv's attributes plus the residual sum's activation (Relu or none).
struct QConvAddAttrs : ConvAttrs {
  bool sum_relu = false;
};

// ConvTranspose.
struct ConvTransposeAttrs : ir::OpAttrs {
  nn::WindowAttrs window;
  int64_t group = 1;
  std::vector<int64_t> output_padding, output_shape;
};

// AffineGrid (ops/resize/grid_sample.h has its base coordinates).
struct AffineGridAttrs : ir::OpAttrs {
  bool align_corners = false;
};

// Col2Im (ops/nn/col2im.h resolves its geometry); each as written, empty when absent.
struct Col2ImAttrs : ir::OpAttrs {
  std::vector<int64_t> dilations, pads, strides;
};

// DeformConv (2-D; ops/nn/deform_conv.h resolves its window and sampling taps).
struct DeformConvAttrs : ir::OpAttrs {
  nn::WindowAttrs window;
  int64_t group = 1, offset_group = 1;
};

// Gemm, MatMul (the defaults) and FusedMatMul (domain kiln: MatMul's operands plus bias and act).
struct GemmAttrs : ir::OpAttrs {
  bool trans_a = false, trans_b = false;
  float alpha = 1.f, beta = 1.f;
  Activation act;
};

// MaxPool and AveragePool.
struct PoolAttrs : ir::OpAttrs {
  nn::WindowAttrs window;
  bool ceil_mode = false;
  bool count_include_pad = false;  // AveragePool
  bool col_major_indices = false;  // MaxPool storage_order = 1
};

// kiln.QAveragePool: its pool's attributes (those of AveragePool; none for GlobalAveragePool)
// and which of the two it is.
struct QPoolAttrs : PoolAttrs {
  bool global = false;
};

// BatchNormalization and FusedBatchNormalization (epsilon, training, act); LayerNormalization
// (axis as written, epsilon, stash_type); InstanceNormalization (epsilon).
struct NormAttrs : ir::OpAttrs {
  float epsilon = 1e-5f;
  int64_t axis = -1;
  int64_t stash_type = 1;
  bool training = false;
  float momentum = 0.9f;  // BatchNormalization's running statistics (training_mode, opset 14+)
  Activation act;
};

// Cast's target type (kUndefined for CastLike, whose target is input 1's dtype).
// One axis as written (not normalized): Concat, Softmax, LogSoftmax, Hardmax (the opset's
// default applied), Gather.
struct AxisAttrs : ir::OpAttrs {
  int64_t axis = 0;
};

// Split: axis as written, the split attribute (before opset 13), num_outputs (opset 18+, 0 when
// absent).
struct SplitAttrs : ir::OpAttrs {
  int64_t axis = 0;
  std::vector<int64_t> split;
  int64_t num_outputs = 0;
};

// Transpose: perm as written; has_perm false means reversed dims.
struct TransposeAttrs : ir::OpAttrs {
  bool has_perm = false;
  std::vector<int64_t> perm;
};

// Slice before opset 10: starts, ends and axes are attributes (later opsets take inputs).
struct SliceAttrs : ir::OpAttrs {
  std::vector<int64_t> starts, ends;
  bool has_axes = false;
  std::vector<int64_t> axes;
};

enum class PadMode { kConstant, kReflect, kEdge, kWrap };
// Pad: mode; pads and value are the attributes of Pad-1/2 (later opsets take inputs).
struct PadAttrs : ir::OpAttrs {
  PadMode mode = PadMode::kConstant;
  std::vector<int64_t> pads;
  float value = 0.f;
};

// The Reduce* family: axes as an attribute (before the opset that made them an input).
struct ReduceAttrs : ir::OpAttrs {
  bool axes_from_input = false;
  bool keepdims = true;
  bool noop_with_empty_axes = false;
  std::vector<int64_t> axes;
};

enum class ResizeInterp { kNearest, kLinear, kCubic };
enum class ResizeCoord {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize,
};
enum class ResizeRounding { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kLegacy };
enum class ResizeAspectPolicy { kStretch, kNotLarger, kNotSmaller };
// Resize and Upsample. `upsample` and `opset` say which input holds the scales.
struct ResizeAttrs : ir::OpAttrs {
  bool upsample = false;
  ResizeInterp interp = ResizeInterp::kNearest;
  ResizeCoord coord = ResizeCoord::kHalfPixel;
  ResizeAspectPolicy policy = ResizeAspectPolicy::kStretch;  // Resize-18
  std::vector<int64_t> axes;                                 // Resize-18; empty: every dim
  ResizeRounding rounding = ResizeRounding::kRoundPreferFloor;
  bool exclude_outside = false;
  bool antialias = false;  // Resize-18: linear/cubic filters widened by 1/scale when shrinking
  double cubic_a = -0.75;
  double extrapolation_value = 0.0;
  std::vector<float> scales;  // Upsample-7's attribute
};

// The activations (Relu, LeakyRelu, Sigmoid, Tanh, HardSigmoid, HardSwish, Elu) and Clip (whose
// min/max are inputs from opset 11: act then holds the attribute form only).
struct ActivationAttrs : ir::OpAttrs {
  Activation act;
};

// LSTM, GRU and RNN: one activation per position (LSTM f, g, h; GRU f, g; RNN f) per direction.
struct RnnActivation {
  enum Kind { kSigmoid, kTanh, kRelu, kHardSigmoid, kLeakyRelu } kind = kSigmoid;
  double alpha = 0, beta = 0;
};
struct RnnAttrs : ir::OpAttrs {
  int64_t directions = 1;  // 2: bidirectional
  bool reverse = false;    // direction "reverse"
  int64_t hidden_size = -1;
  int64_t layout = 0;               // 1: batch first
  double clip = 0;                  // 0: none
  std::vector<RnnActivation> acts;  // per direction: LSTM 3, GRU 2, RNN 1
  // No clip, and per direction the activations `kinds` (`kinds` lists one direction's).
  bool ActsAre(std::initializer_list<RnnActivation::Kind> kinds) const {
    if (clip > 0 || kinds.size() == 0) return false;
    for (size_t i = 0; i < acts.size(); ++i)
      if (acts[i].kind != kinds.begin()[i % kinds.size()]) return false;
    return true;
  }
};
struct LstmAttrs : RnnAttrs {
  bool input_forget = false;
  // The ONNX defaults: Sigmoid, Tanh, Tanh everywhere, no clip, no coupled input/forget gate.
  bool DefaultMath() const {
    return !input_forget &&
           ActsAre({RnnActivation::kSigmoid, RnnActivation::kTanh, RnnActivation::kTanh});
  }
};
struct GruAttrs : RnnAttrs {
  bool linear_before_reset = false;  // 1: r multiplies (R_h h + Rb_h), PyTorch's form
};

}  // namespace kiln::ops
