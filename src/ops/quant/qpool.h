// kiln.QAveragePool's typed attributes (qpool.cc has the op and its rules), read by the CPU
// backend's oneDNN pooling kernel (backends/cpu/pool_onednn.cc).
#pragma once

#include "ops/nn/pool.h"

namespace kiln::ops {

// kiln.QAveragePool: its pool's attributes (those of AveragePool; none for GlobalAveragePool)
// and which of the two it is.
struct QPoolAttrs : PoolAttrs {
  bool global = false;
};

}  // namespace kiln::ops
