// Dynamic batching in process: many callers' small requests for one Session, merged into batches
// (NVIDIA Triton's dynamic batcher is the model: max batch size, max queue delay, preferred batch
// sizes, a bounded queue that rejects at once when full, per-request deadlines, priority levels).
//
// A request holds one or more samples: every input's first dimension is the request's sample
// count, the same for all its inputs. Requests merge only with requests whose other dimensions
// (and dtypes) match: there is one queue per such shape signature. A batch is the concatenation
// of its requests along the first dimension; each request gets back its own rows of every output.
//
// The policy is the pure function FormBatch() below, tested with a fake clock. Beyond Triton: a
// request that finds the engine idle runs at once (with whatever else is queued) instead of
// waiting max_queue_delay for company; under load the queue fills while a batch runs, so batches
// grow by themselves.
//
// Ownership: the batcher borrows the Session, which must outlive it. Thread-safety: every method
// may be called from any thread; one worker thread runs the batches.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kiln/session.h"
#include "kiln/status.h"

namespace kiln {

using BatchClock = std::chrono::steady_clock;

struct BatchPolicy {
  int max_batch = 32;                // samples per batch at most
  int64_t max_queue_delay_us = 500;  // the longest the oldest request waits for company
  // Batch sizes the batcher prefers to run (ascending, each <= max_batch): when the queue holds
  // at least the largest one it can reach, it runs that many at once.
  std::vector<int> preferred_sizes;
  size_t max_queue = 1024;    // requests waiting, over all shapes; more are rejected (Unavailable)
  bool run_when_idle = true;  // an idle engine runs what is queued without waiting
  // false: requests never merge (one request per run, any shapes; for models without a symbolic
  // batch dimension). The queue bound, deadlines, priorities and stats still apply.
  bool merge = true;
  // true: a deadline covers the run too. A request whose deadline would pass before its batch is
  // expected to finish is dropped with DeadlineExceeded instead of run: the expected run time is
  // the fastest of the last 8 Runs of that batch size (or of the nearest size, scaled by the
  // sample count), from sizes run at least twice; before that only the queue wait counts (an
  // optimistic estimate: it errs towards running). Accepted requests then
  // finish within their deadlines (up to the estimate's error), and under overload the engine
  // spends its time on requests that can still make theirs. false (default, Triton's meaning):
  // the deadline bounds the wait in the queue.
  bool deadline_includes_run = false;
  // Added to the worker thread's nice value (0..19; the result is capped at 19). The compute
  // threads its runs start (OpenMP's team) inherit it. Above 0, threads of normal priority on the
  // same cores (a server's I/O threads, its clients) preempt the runs: refusals and small
  // requests are answered sooner while batches run, at the cost of the runs' own time whenever
  // anything else wants the cores. Requests run inline by Infer keep their caller's priority.
  int worker_nice = 0;
};

// What the policy sees of one queued request (front = oldest of the highest priority).
struct QueuedRequest {
  int samples = 1;
  BatchClock::time_point arrival;
};

// Take the first `take` requests now, or (take == 0) wait until `wait_until` or a new arrival.
struct BatchDecision {
  size_t take = 0;
  BatchClock::time_point wait_until = BatchClock::time_point::max();
};

// The policy, on one shape's queue: let R be the longest run of requests from the front whose
// samples fit in max_batch. Take R when (a) it fills max_batch or the next request would not
// fit; else take the longest prefix of R whose samples equal a preferred size, if any (b); else
// take R when (c) the oldest request has waited max_queue_delay_us or (d) the engine is idle and
// run_when_idle; otherwise wait until the oldest request's delay runs out. An empty queue waits
// forever.
BatchDecision FormBatch(std::span<const QueuedRequest> queue, BatchClock::time_point now,
                        const BatchPolicy& policy, bool engine_idle);

struct RequestOptions {
  // A request still queued at its deadline is dropped with DeadlineExceeded (never run).
  std::optional<BatchClock::time_point> deadline;
  int priority = 0;  // lower runs first; FIFO within a priority
};

// What the batcher did, as numbers.
struct BatcherStats {
  uint64_t requests = 0;  // accepted
  uint64_t rejected = 0;  // queue full, or after Shutdown
  uint64_t expired = 0;   // dropped at their deadline
  uint64_t failed = 0;    // their batch's run failed
  uint64_t batches = 0;
  uint64_t batched_samples = 0;  // samples run, over all batches
  size_t queued = 0;             // requests waiting now
  bool busy = false;             // a batch is running now
  double queue_us_total = 0;     // summed over completed requests: arrival to batch start
  double compute_us_total = 0;   // summed over batches: the batch's Run
};

// One batch, as the observer (DynamicBatcher::SetObserver) sees it after the run.
struct BatchEvent {
  int samples = 0;               // the batch's size
  std::vector<double> queue_us;  // each request's wait: arrival to batch start
  double compute_us = 0;         // gather + Run + scatter
  bool ok = true;
  // When the batch started: steady_clock microseconds since its epoch (RunTimings::start_us's
  // clock), and the thread that ran it (Linux thread id).
  double start_us = 0;
  int thread = 0;
  // With DynamicBatcher::SetTraceKernels(true): the run's per-kernel timings (CPU); else empty.
  RunTimings run;
};

class DynamicBatcher {
 public:
  using Done = std::function<void(Status, std::vector<NamedTensor>)>;
  using Observer = std::function<void(const BatchEvent&)>;

  // InvalidArgument for a policy that cannot work (max_batch < 1, a preferred size outside
  // 1..max_batch, max_queue 0).
  static StatusOr<std::unique_ptr<DynamicBatcher>> Create(const Session& session,
                                                          BatchPolicy policy);
  // Finishes what is queued, then stops the worker.
  ~DynamicBatcher();
  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;

  // Queues a request; `done` is called once, on the worker thread, with the request's outputs or
  // why there are none. A malformed request (an input missing or unknown, inputs whose first
  // dims differ, more samples than max_batch) or a full queue is answered at once, on the
  // caller's thread, and returns that Status too (Unavailable when full).
  Status Submit(std::vector<NamedTensor> inputs, Done done, RequestOptions options = {});
  // Submit, then wait for the result. When the engine is idle and nothing is queued (and
  // run_when_idle), the request runs at once on the calling thread instead (the worker waits for
  // it), which saves the two thread hand-offs; the stats and the observer count it as a batch.
  Status Infer(std::vector<NamedTensor> inputs, std::vector<NamedTensor>* outputs,
               RequestOptions options = {});
  // Stops accepting (Unavailable), runs every queued request, then returns.
  void Shutdown();
  BatcherStats stats() const;
  // Called on the worker thread after every batch, before the requests' `done` (metrics). Set it
  // before the first Submit.
  void SetObserver(Observer observer);
  // Per-kernel timing of the batches' runs (BatchEvent::run), for traces; off by default (on, it
  // costs two clock reads per step). May be switched at any time.
  void SetTraceKernels(bool on);

 private:
  struct Impl;
  explicit DynamicBatcher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
