// One thread setting shared by oneDNN and kiln's own loops: both run on the OpenMP runtime that
// Debian's oneDNN is built with, so there is a single pool and no oversubscription.
#pragma once

#include <cstdint>
#include <type_traits>

namespace kiln {

// Distinct physical cores of this machine (hyper-threads not counted); at least 1.
int PhysicalCores();
// Compute threads when the caller sets none: OMP_NUM_THREADS if set, else the physical cores
// capped by the CPUs this process may use (affinity mask, cgroup quota); core/cpu_info.h.
int DefaultThreads();
// Sets the OpenMP thread count for parallel regions started by the calling thread.
void SetThreadCount(int n);
// A non-owning reference to a callable fn(int64_t begin, int64_t end): unlike std::function it
// never allocates (a lambda with many captures would), so kernels' hot paths can take it. The
// callable must outlive the call it is passed to.
class RangeFn {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, RangeFn>>>
  RangeFn(const F& fn)  // NOLINT(google-explicit-constructor): lambdas convert implicitly
      : object_(&fn),
        call_([](const void* o, int64_t b, int64_t e) { (*static_cast<const F*>(o))(b, e); }) {}
  void operator()(int64_t begin, int64_t end) const { call_(object_, begin, end); }

 private:
  const void* object_;
  void (*call_)(const void*, int64_t, int64_t);
};

// Runs fn(begin, end) over [0, n) split in contiguous chunks across the current thread count;
// serial when n is small (below `grain` per thread).
void ParallelFor(int64_t n, int64_t grain, RangeFn fn);

}  // namespace kiln
