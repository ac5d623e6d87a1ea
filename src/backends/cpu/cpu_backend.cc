// The CPU backend. Today it executes every op with its reference kernel (registered by the ops
// layer); fast kernels (oneDNN, vectorised C++) register here with KILN_REGISTER_KERNEL and a
// priority above the reference, and declare Supports() with reasons.
#include "runtime/kernel.h"

namespace kiln::backends::cpu {

// Anchor so the backend library is linked; kernels register from their own translation units.
const char* BackendName() { return "cpu"; }

}  // namespace kiln::backends::cpu
