// The Conv reference routine shared by Conv (conv.cc) and kiln's FusedConv (ops/fused/): attribute
// parsing, shape checking and the direct-convolution loop; and ConvAttrs, the typed attributes the
// convolutions return, which the CPU and CUDA convolution kernels read.
//
// Layout: X [N, C, D1..Dn], W [M, C/group, k1..kn], optional B [M], Y [N, M, O1..On], row-major;
// float32 only; 1 to 3 spatial dims.
#pragma once

#include <string>

#include "ir/op.h"
#include "ops/activation.h"
#include "ops/nn/spatial.h"

namespace kiln::ops::nn {

struct ConvParams {
  WindowAttrs window;
  int64_t group = 1;
};

// Parses and checks Conv's attributes (auto_pad, kernel_shape, strides, dilations, pads, group).
Status ParseConvParams(const ir::Node& node, ConvParams* params);

// Checks inputs 0..2 (X, W, optional B) of `ctx` and returns Y's shape. `describe` names the node
// in Unsupported messages.
StatusOr<Shape> InferConvShape(const ConvParams& params, const ir::InferContext& ctx,
                               const std::string& describe);

// Y = Conv(X, W) + B with double accumulation; `b` may be null; `y` is allocated with the shape
// InferConvShape returned. Returns the violated rule as text, "" when fine.
std::string ConvReference(const ConvParams& params, const Tensor& x, const Tensor& w,
                          const Tensor* b, Tensor* y);

// The same loop on double operands (the integer convolutions: QLinearConv, ConvInteger, whose
// products and sums are exact in double): y [N, M, out_plane] = Conv(x, w) + bias, `bias` [M] or
// null. Shapes as ConvReference; returns the violated rule or "".
std::string ConvReferenceF64(const ConvParams& params, const Shape& xs, const double* x,
                             const Shape& ws, const double* w, const double* bias, double* y,
                             int64_t out_plane);

// FusedConv's epilogue, shared with QConv: y += z (when `z` is given; it must have y's shape),
// then the activation. Returns the violated rule, "" when fine.
std::string AddResidualAndActivate(const Activation& act, const Tensor* z, Tensor* y);

}  // namespace kiln::ops::nn

namespace kiln::ops {

// Conv (act kNone) and FusedConv (domain kiln).
// Also returned by com.microsoft's FusedConv and NhwcConv (ops/contrib/conv.cc) and by
// QLinearConv and ConvInteger (ops/quant/qlinear.cc).
struct ConvAttrs : ir::OpAttrs {
  nn::ConvParams conv;
  Activation act;
};

}  // namespace kiln::ops
