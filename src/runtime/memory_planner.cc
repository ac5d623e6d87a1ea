#include "runtime/memory_planner.h"

#include <algorithm>
#include <numeric>

namespace kiln::runtime {

namespace {
constexpr size_t kAlign = 64;
size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

MemoryLayout PlanMemory(const std::vector<BufferRequest>& requests) {
  MemoryLayout out;
  out.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });
  struct Placed {
    size_t offset, bytes;
    int first, last;
  };
  std::vector<Placed> placed;
  for (size_t idx : order) {
    const BufferRequest& r = requests[idx];
    const size_t bytes = AlignUp(std::max<size_t>(r.bytes, 1));
    // Ranges taken by buffers alive at the same time, sorted by offset.
    std::vector<std::pair<size_t, size_t>> busy;
    for (const Placed& p : placed)
      if (p.first <= r.last_step && r.first_step <= p.last)
        busy.push_back({p.offset, p.offset + p.bytes});
    std::sort(busy.begin(), busy.end());
    // Best fit: the smallest gap that holds the buffer; else the end.
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
    for (const auto& [b, e] : busy) {
      if (b > cursor && b - cursor >= bytes && b - cursor < best_gap) {
        best = cursor;
        best_gap = b - cursor;
      }
      cursor = std::max(cursor, e);
    }
    if (best == SIZE_MAX) best = cursor;
    out.offsets[idx] = best;
    placed.push_back({best, bytes, r.first_step, r.last_step});
    out.arena_bytes = std::max(out.arena_bytes, best + bytes);
  }
  return out;
}

}  // namespace kiln::runtime
