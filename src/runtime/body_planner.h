// The runtime's BodyPlanner (runtime/kernel.h): control-flow bodies planned and run like models.
//
// Each body is copied, captured values that are constant in the enclosing plan are baked into it
// as constants, and it is checked like a model. For each signature of input shapes a body meets (a
// Loop's carried values usually keep theirs, so one plan serves every iteration), the Ifs those
// shapes decide are inlined (passes/inline_if.h: exporters' shape checks, 24 in Silero VAD's
// bodies, would otherwise leave everything after them on reference kernels), the default passes
// optimize the result, and the planner (runtime/planner.h) plans it on the CPU; an Executor runs
// it. At most kMaxBodyPlans per body are kept; a body seeing more signatures runs the extra ones
// with a plan made for the call. Plans are shared by concurrent runs.
#pragma once

#include <memory>

#include "kiln/options.h"
#include "runtime/kernel.h"

namespace kiln::runtime {

inline constexpr size_t kMaxBodyPlans = 16;

// Bodies planned under the session's `options` on the CPU (threads, precision, passes; never
// tuned or cached).
std::unique_ptr<BodyPlanner> NewBodyPlanner(const SessionOptions& options);

}  // namespace kiln::runtime
