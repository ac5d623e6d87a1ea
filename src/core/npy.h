// NumPy .npy reading and writing (format versions 1.0-3.0, little-endian, C order). Supports
// float32/64, int8/16/32/64, uint8/16/32/64 and bool. Fortran-ordered or big-endian files are
// rejected with a message saying so.
#pragma once

#include <string>

#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln {

StatusOr<Tensor> ParseNpy(const std::string& bytes);
StatusOr<Tensor> ReadNpyFile(const std::string& path);
Status WriteNpyFile(const Tensor& t, const std::string& path);

}  // namespace kiln
