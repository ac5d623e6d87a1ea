// Cast's element conversion (cast.cc has the rules), shared by the op's reference kernel and the
// CPU backend's parallel kernel (backends/cpu/small_loops.cc), so every (from, to) pair has one
// definition.
#pragma once

#include <cstdint>

#include "ir/op.h"
#include "kiln/tensor.h"

namespace kiln::ops {

// How values that do not fit are converted (Cast-19's `saturate`, Cast-24's `round_mode`).
struct CastRules {
  bool saturate = true;  // to the 8-bit floats: past the largest finite -> it (else NaN or inf)
  int e8m0_round = 0;    // to float8e8m0: 0 "up", 1 "down", 2 "nearest"
};

struct CastAttrs : ir::OpAttrs {
  DataType to = DataType::kUndefined;  // kUndefined for CastLike (input 1's type)
  CastRules rules;
};

// Converts n elements of dtype `from` at src to dtype `to` at dst with Cast's rules; false when
// either type is not castable (nothing written).
bool CastElements(DataType from, DataType to, const void* src, void* dst, int64_t n,
                  const CastRules& rules = {});

}  // namespace kiln::ops
