// One thread setting shared by oneDNN and kiln's own loops: both run on the OpenMP runtime that
// Debian's oneDNN is built with, so there is a single pool and no oversubscription.
#pragma once

#include <cstdint>
#include <functional>

namespace kiln {

// Distinct physical cores of this machine (hyper-threads not counted); at least 1.
int PhysicalCores();
// Sets the OpenMP thread count for parallel regions started by the calling thread.
void SetThreadCount(int n);
// Runs fn(begin, end) over [0, n) split in contiguous chunks across the current thread count;
// serial when n is small (below `grain` per thread).
void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace kiln
