// MemoryPlanner: places a plan's intermediate values in one arena. Each value has a size and a
// live interval [first step writing it, last step reading it]; values whose intervals overlap get
// disjoint byte ranges, others may share. Placement is greedy best-fit by decreasing size (the
// classic offset-assignment heuristic TFLite and ONNX Runtime use), 64-byte aligned. Pure function
// of its input; unit-tested in tests/runtime/memory_planner_test.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln::runtime {

struct BufferRequest {
  size_t bytes = 0;
  int first_step = 0;  // inclusive
  int last_step = 0;   // inclusive
};

struct MemoryLayout {
  std::vector<size_t> offsets;  // per request
  size_t arena_bytes = 0;       // peak
};

MemoryLayout PlanMemory(const std::vector<BufferRequest>& requests);

}  // namespace kiln::runtime
