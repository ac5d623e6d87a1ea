// Cast's element conversion (cast.cc has the rules), shared by the op's reference kernel and the
// CPU backend's parallel kernel (backends/cpu/small_loops.cc), so every (from, to) pair has one
// definition.
#pragma once

#include <cstdint>

#include "kiln/tensor.h"

namespace kiln::ops {

// Converts n elements of dtype `from` at src to dtype `to` at dst with Cast's rules; false when
// either type is not castable (nothing written).
bool CastElements(DataType from, DataType to, const void* src, void* dst, int64_t n);

}  // namespace kiln::ops
