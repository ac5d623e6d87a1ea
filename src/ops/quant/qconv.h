// The typed attributes of kiln's quantized convolutions (qconv.cc has the ops and their rules):
// QConv, QConvAdd and QConvDw return QConvAddAttrs (sum_relu false but for QConvAdd), which the
// CPU backend's oneDNN kernel (backends/cpu/qconv_onednn.cc) reads.
#pragma once

#include "ops/nn/conv.h"

namespace kiln::ops {

// kiln.QConvAdd: QConv's attributes plus the residual sum's activation (Relu or none).
struct QConvAddAttrs : ConvAttrs {
  bool sum_relu = false;
};

}  // namespace kiln::ops
