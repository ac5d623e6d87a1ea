// FormBatch and DynamicBatcher (include/kiln/batcher.h). One worker thread: it drops requests
// whose deadline passed, asks FormBatch of each shape queue, runs the batch whose oldest request
// is oldest, gathers the requests' inputs into one tensor per input (a lone request's inputs are
// used as they are), runs the session, and hands each request views of its rows of the outputs.
#include "kiln/batcher.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace kiln {

BatchDecision FormBatch(std::span<const QueuedRequest> queue, BatchClock::time_point now,
                        const BatchPolicy& policy, bool engine_idle) {
  BatchDecision d;
  if (queue.empty()) return d;
  // The longest front run that fits, and the largest preferred size a prefix of it reaches.
  size_t fit = 0, preferred = 0;
  int samples = 0;
  bool full = false;
  for (const QueuedRequest& r : queue) {
    if (samples + r.samples > policy.max_batch) {
      full = true;  // the next request would not fit
      break;
    }
    samples += r.samples;
    ++fit;
    if (std::find(policy.preferred_sizes.begin(), policy.preferred_sizes.end(), samples) !=
        policy.preferred_sizes.end())
      preferred = fit;
  }
  if (fit == 0) return d;  // the front request alone exceeds max_batch (refused at Submit)
  const auto deadline = queue.front().arrival +
                        std::chrono::microseconds(std::max<int64_t>(policy.max_queue_delay_us, 0));
  if (full || samples == policy.max_batch)
    d.take = fit;  // (a) as full as it can get
  else if (preferred > 0)
    d.take = preferred;  // (b) the largest preferred size the queue reaches
  else if (now >= deadline || (engine_idle && policy.run_when_idle))
    d.take = fit;  // (c) waited long enough, or (d) nothing else is running
  else
    d.wait_until = deadline;
  return d;
}

namespace {

struct Pending {
  std::vector<NamedTensor> inputs;  // in the session's input order
  int samples = 1;
  BatchClock::time_point arrival;
  std::optional<BatchClock::time_point> deadline;
  int priority = 0;
  DynamicBatcher::Done done;
};

double Micros(BatchClock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

double SinceEpochUs(BatchClock::time_point t) { return Micros(t.time_since_epoch()); }

}  // namespace

struct DynamicBatcher::Impl {
  const Session* session = nullptr;
  BatchPolicy policy;
  mutable std::mutex mu;
  std::condition_variable wake;
  std::map<std::string, std::deque<Pending>> queues;  // by shape signature
  size_t queued = 0;
  bool stopping = false;
  bool busy = false;  // a batch runs (on the worker) or a lone request runs inline (Infer)
  BatcherStats stats;
  Observer observer;
  std::atomic<bool> trace_kernels{false};
  std::thread worker;
  // The last successful Runs of each batch size (at most kRunsKept), for ExpectedRunUs.
  static constexpr size_t kRunsKept = 8;
  std::map<int, std::deque<double>> runs_by_size;

  // The expected Run time of a batch of `samples` (deadline_includes_run); call under `mu`.
  double ExpectedRunUs(int samples) const;

  StatusOr<std::string> Check(std::vector<NamedTensor>* inputs, int* samples) const;
  // Counts a batch that ran (run_us: the session's Run alone) and shows it to the observer.
  void Account(const BatchEvent& e, double run_us);
  void Loop();
  void RunBatch(std::vector<Pending> batch);
  // Moves the requests among the first `limit` of `q` for which `leaves` holds out of the queue
  // (under `mu`); then, if any left, answers each with `why(request)` with `mu` released, and
  // returns true.
  bool Expire(std::unique_lock<std::mutex>& lock, std::deque<Pending>& q, size_t limit,
              const std::function<bool(const Pending&)>& leaves,
              const std::function<Status(const Pending&)>& why);
};

// Puts the inputs in the session's order and checks them against the declared specs, so one bad
// request can never fail a batch; returns the shape signature.
StatusOr<std::string> DynamicBatcher::Impl::Check(std::vector<NamedTensor>* inputs,
                                                  int* samples) const {
  const std::vector<TensorSpec>& specs = session->inputs();
  std::vector<NamedTensor> ordered(specs.size());
  std::vector<bool> seen(specs.size(), false);
  for (NamedTensor& in : *inputs) {
    size_t k = 0;
    while (k < specs.size() && specs[k].name != in.name) ++k;
    if (k == specs.size()) return InvalidArgument("unknown input '" + in.name + "'");
    if (seen[k]) return InvalidArgument("input '" + in.name + "' given twice");
    seen[k] = true;
    ordered[k] = std::move(in);
  }
  std::string key;
  *samples = -1;
  if (!policy.merge) {  // one request per run: the session checks the shapes when it runs
    for (size_t k = 0; k < specs.size(); ++k)
      if (!seen[k])
        return InvalidArgument("missing input '" + specs[k].name + "' (" + specs[k].ToString() +
                               ")");
    *samples = 1;
    *inputs = std::move(ordered);
    return key;
  }
  for (size_t k = 0; k < specs.size(); ++k) {
    const TensorSpec& spec = specs[k];
    if (!seen[k])
      return InvalidArgument("missing input '" + spec.name + "' (" + spec.ToString() + ")");
    const Tensor& t = ordered[k].tensor;
    if (t.dtype() != spec.dtype || t.rank() != static_cast<int64_t>(spec.dims.size()) ||
        t.rank() < 1)
      return InvalidArgument("input '" + spec.name + "': expected " + spec.ToString() + ", got " +
                             DataTypeName(t.dtype()) + ShapeToString(t.shape()));
    for (size_t d = 1; d < spec.dims.size(); ++d)
      if (spec.dims[d] >= 0 && spec.dims[d] != t.shape()[d])
        return InvalidArgument("input '" + spec.name + "': expected " + spec.ToString() + ", got " +
                               DataTypeName(t.dtype()) + ShapeToString(t.shape()));
    const int64_t n = t.shape()[0];
    if (*samples >= 0 && n != *samples)
      return InvalidArgument("input '" + spec.name + "' has " + std::to_string(n) +
                             " samples (first dim), the other inputs " + std::to_string(*samples));
    if (n < 1 || n > policy.max_batch)
      return InvalidArgument("input '" + spec.name + "' has " + std::to_string(n) +
                             " samples (first dim); a request holds 1 to max_batch = " +
                             std::to_string(policy.max_batch));
    *samples = static_cast<int>(n);
    key += std::string(DataTypeName(t.dtype())) +
           ShapeToString(Shape(t.shape().begin() + 1, t.shape().end())) + ";";
  }
  *inputs = std::move(ordered);
  return key;
}

// The fastest of the last runs of the nearest batch size run at least twice, scaled by the
// sample count; 0 (no estimate) before any size ran twice. The minimum, and two runs at least:
// a cold first run (allocation, caches) or a slow moment must not make the batcher drop
// requests that would make their deadlines, since dropped requests never correct the estimate.
double DynamicBatcher::Impl::ExpectedRunUs(int samples) const {
  int best = -1;
  double best_us = 0;
  for (const auto& [size, runs] : runs_by_size) {
    if (runs.size() < 2) continue;
    if (best < 0 || std::abs(size - samples) < std::abs(best - samples)) {
      best = size;
      best_us = *std::min_element(runs.begin(), runs.end());
    }
  }
  return best < 0 ? 0 : best_us * static_cast<double>(samples) / static_cast<double>(best);
}

namespace {
Status WouldMissDeadline(int samples, double expected_us, double left_us) {
  return Status(StatusCode::kDeadlineExceeded,
                "the request's deadline would pass before its batch of " + std::to_string(samples) +
                    " samples could finish (expected run " +
                    std::to_string(static_cast<int64_t>(expected_us)) + " us, " +
                    std::to_string(static_cast<int64_t>(left_us)) +
                    " us left; deadline_includes_run); it was not run");
}
}  // namespace

DynamicBatcher::DynamicBatcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StatusOr<std::unique_ptr<DynamicBatcher>> DynamicBatcher::Create(const Session& session,
                                                                 BatchPolicy policy) {
  if (policy.max_batch < 1)
    return InvalidArgument("max_batch must be >= 1; got " + std::to_string(policy.max_batch));
  if (policy.max_queue == 0) return InvalidArgument("max_queue must be >= 1; got 0");
  std::sort(policy.preferred_sizes.begin(), policy.preferred_sizes.end());
  for (int p : policy.preferred_sizes)
    if (p < 1 || p > policy.max_batch)
      return InvalidArgument("preferred batch sizes must be in 1..max_batch = " +
                             std::to_string(policy.max_batch) + "; got " + std::to_string(p));
  if (policy.worker_nice < 0 || policy.worker_nice > 19)
    return InvalidArgument(
        "worker_nice must be in 0..19 (a worker can only be made to yield); got " +
        std::to_string(policy.worker_nice));
  if (!policy.merge) policy.max_batch = 1;
  if (session.inputs().empty()) return InvalidArgument("the model has no inputs to batch");
  for (const TensorSpec& spec : session.inputs())
    if (policy.merge && (spec.dims.empty() || spec.dims[0] >= 0))
      return InvalidArgument("input " + spec.name + " is " + spec.ToString() +
                             ": batching needs a symbolic first (batch) dimension");
  auto impl = std::make_unique<Impl>();
  impl->session = &session;
  impl->policy = std::move(policy);
  Impl* raw = impl.get();
  impl->worker = std::thread([raw] { raw->Loop(); });
  return std::unique_ptr<DynamicBatcher>(new DynamicBatcher(std::move(impl)));
}

DynamicBatcher::~DynamicBatcher() { Shutdown(); }

void DynamicBatcher::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->worker.joinable()) impl_->worker.join();
}

void DynamicBatcher::SetTraceKernels(bool on) { impl_->trace_kernels.store(on); }

void DynamicBatcher::SetObserver(Observer observer) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->observer = std::move(observer);
}

BatcherStats DynamicBatcher::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  BatcherStats s = impl_->stats;
  s.queued = impl_->queued;
  s.busy = impl_->busy;
  return s;
}

Status DynamicBatcher::Submit(std::vector<NamedTensor> inputs, Done done, RequestOptions options) {
  Impl& m = *impl_;
  Pending p;
  auto key = m.Check(&inputs, &p.samples);
  if (!key.ok()) {
    {
      std::lock_guard<std::mutex> lock(m.mu);
      ++m.stats.rejected;
    }
    done(key.status(), {});
    return key.status();
  }
  p.inputs = std::move(inputs);
  p.arrival = BatchClock::now();
  p.deadline = options.deadline;
  p.priority = options.priority;
  p.done = std::move(done);
  Status refused;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.stopping) {
      refused = Unavailable("the batcher is shutting down");
    } else if (m.queued >= m.policy.max_queue) {
      refused = Unavailable("the queue is full (" + std::to_string(m.policy.max_queue) +
                            " requests waiting); try again later");
    }
    if (!refused.ok()) {
      ++m.stats.rejected;
    } else {
      std::deque<Pending>& q = m.queues[*key];
      // FIFO within a priority; a lower priority value goes before higher ones.
      auto at = std::find_if(q.begin(), q.end(),
                             [&](const Pending& o) { return o.priority > p.priority; });
      q.insert(at, std::move(p));
      ++m.queued;
      ++m.stats.requests;
    }
  }
  if (!refused.ok()) {
    p.done(refused, {});
    return refused;
  }
  m.wake.notify_one();
  return OkStatus();
}

Status DynamicBatcher::Infer(std::vector<NamedTensor> inputs, std::vector<NamedTensor>* outputs,
                             RequestOptions options) {
  Impl& m = *impl_;
  // An idle engine with nothing queued runs the request at once on this thread: no hand-off to
  // the worker and back (two thread wake-ups, 0.3-0.5 ms on a loaded 2-core machine).
  bool inline_run = false;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.policy.run_when_idle && !m.busy && !m.stopping && m.queued == 0) {
      m.busy = true;
      inline_run = true;
    }
  }
  if (inline_run) {
    int samples = 1;
    auto key = m.Check(&inputs, &samples);
    Status s = key.status();
    const auto start = BatchClock::now();
    if (s.ok() && m.policy.deadline_includes_run && options.deadline) {
      double expected = 0;
      {
        std::lock_guard<std::mutex> lock(m.mu);
        expected = m.ExpectedRunUs(samples);
      }
      const double left = Micros(*options.deadline - start);
      if (left < expected) {
        {
          std::lock_guard<std::mutex> lock(m.mu);
          m.busy = false;
          ++m.stats.requests;
          ++m.stats.expired;
        }
        m.wake.notify_all();
        outputs->clear();
        return WouldMissDeadline(samples, expected, left);
      }
    }
    RunTimings timings;
    timings.per_node = m.trace_kernels.load(std::memory_order_relaxed);
    if (s.ok()) s = m.session->Run(inputs, outputs, timings.per_node ? &timings : nullptr);
    const double compute_us = Micros(BatchClock::now() - start);
    {
      std::lock_guard<std::mutex> lock(m.mu);
      m.busy = false;
      ++(key.ok() ? m.stats.requests : m.stats.rejected);
    }
    m.wake.notify_all();  // requests that arrived meanwhile are the worker's
    if (key.ok()) {
      BatchEvent e;
      e.samples = samples;
      e.queue_us = {0.0};
      e.compute_us = compute_us;
      e.ok = s.ok();
      e.start_us = SinceEpochUs(start);
      e.thread = static_cast<int>(gettid());
      e.run = std::move(timings);
      m.Account(e, compute_us);
    }
    if (!s.ok()) outputs->clear();
    return s;
  }
  std::promise<Status> result;
  std::future<Status> ready = result.get_future();
  // A refused request has its `done` called too, so the future always gets the answer.
  (void)Submit(
      std::move(inputs),
      [&result, outputs](Status s, std::vector<NamedTensor> outs) {
        *outputs = std::move(outs);
        result.set_value(std::move(s));
      },
      options);
  return ready.get();  // `done` has run, on this thread or the worker's
}

void DynamicBatcher::Impl::Loop() {
  if (policy.worker_nice > 0) {
    // Linux keeps a nice value per thread; threads created from here on inherit it. Raising it
    // needs no privilege, so this cannot fail for want of one.
    const auto tid = static_cast<id_t>(gettid());
    errno = 0;
    const int now = getpriority(PRIO_PROCESS, tid);
    if (errno == 0) setpriority(PRIO_PROCESS, tid, std::min(19, now + policy.worker_nice));
  }
  std::vector<QueuedRequest> view;
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    if (stopping && queued == 0) return;
    if (busy) {  // a lone request runs inline on its caller's thread (Infer); it wakes us
      wake.wait(lock);
      continue;
    }
    const auto now = BatchClock::now();
    // Requests past their deadline leave without running.
    bool dropped = false;
    for (auto& [key, q] : queues)
      dropped |= Expire(
          lock, q, q.size(), [&](const Pending& p) { return p.deadline && *p.deadline <= now; },
          [&](const Pending& p) {
            return Status(StatusCode::kDeadlineExceeded,
                          "the request's deadline passed while it waited in the queue (" +
                              std::to_string(static_cast<int64_t>(Micros(now - p.arrival))) +
                              " us); it was not run");
          });
    if (dropped) continue;
    // The ready queue whose front request is oldest; else the earliest time one becomes ready.
    std::deque<Pending>* pick = nullptr;
    size_t take = 0;
    auto wait_until = BatchClock::time_point::max();
    for (auto& [key, q] : queues) {
      if (q.empty()) continue;
      view.clear();
      for (const Pending& p : q) view.push_back({p.samples, p.arrival});
      BatchDecision d = FormBatch(view, now, policy, /*engine_idle=*/true);
      if (stopping && d.take == 0) d = FormBatch(view, BatchClock::time_point::max(), policy, true);
      if (d.take > 0 && (pick == nullptr || q.front().arrival < pick->front().arrival)) {
        pick = &q;
        take = d.take;
      }
      wait_until = std::min(wait_until, d.wait_until);
      for (const Pending& p : q)
        if (p.deadline) wait_until = std::min(wait_until, *p.deadline);
    }
    if (pick == nullptr) {
      if (wait_until == BatchClock::time_point::max())
        wake.wait(lock);
      else
        wake.wait_until(lock, wait_until);
      continue;
    }
    if (policy.deadline_includes_run) {
      // Requests of this batch whose deadline falls before its expected end leave unrun.
      int samples = 0;
      for (size_t i = 0; i < take; ++i) samples += (*pick)[i].samples;
      const double expected = ExpectedRunUs(samples);
      const auto end = now + std::chrono::microseconds(static_cast<int64_t>(expected));
      if (Expire(
              lock, *pick, take, [&](const Pending& p) { return p.deadline && *p.deadline < end; },
              [&](const Pending& p) {
                return WouldMissDeadline(samples, expected, Micros(*p.deadline - now));
              }))
        continue;  // form the batch again from what is left
    }
    std::vector<Pending> batch;
    for (size_t i = 0; i < take; ++i) {
      batch.push_back(std::move(pick->front()));
      pick->pop_front();
    }
    queued -= take;
    busy = true;
    lock.unlock();
    RunBatch(std::move(batch));
    lock.lock();
    busy = false;
  }
}

bool DynamicBatcher::Impl::Expire(std::unique_lock<std::mutex>& lock, std::deque<Pending>& q,
                                  size_t limit, const std::function<bool(const Pending&)>& leaves,
                                  const std::function<Status(const Pending&)>& why) {
  std::vector<Pending> out;
  auto it = q.begin();
  for (size_t i = 0; i < limit && it != q.end(); ++i) {
    if (leaves(*it)) {
      out.push_back(std::move(*it));
      it = q.erase(it);
    } else {
      ++it;
    }
  }
  if (out.empty()) return false;
  queued -= out.size();
  stats.expired += out.size();
  lock.unlock();
  for (Pending& p : out) p.done(why(p), {});
  lock.lock();
  return true;
}

void DynamicBatcher::Impl::Account(const BatchEvent& e, double run_us) {
  {
    std::lock_guard<std::mutex> lock(mu);
    ++stats.batches;
    if (e.ok) {
      std::deque<double>& runs = runs_by_size[e.samples];
      runs.push_back(run_us);
      if (runs.size() > kRunsKept) runs.pop_front();
    }
    stats.batched_samples += static_cast<uint64_t>(e.samples);
    stats.compute_us_total += run_us;
    for (double q : e.queue_us) stats.queue_us_total += q;
    if (!e.ok) stats.failed += e.queue_us.size();
  }
  if (observer) observer(e);
}

void DynamicBatcher::Impl::RunBatch(std::vector<Pending> batch) {
  const auto start = BatchClock::now();
  int total = 0;
  for (const Pending& p : batch) total += p.samples;
  const size_t num_inputs = batch.front().inputs.size();
  // Gather: one tensor per input, the requests' rows one after the other.
  std::vector<NamedTensor> inputs;
  if (batch.size() == 1) {
    inputs = batch.front().inputs;
  } else {
    for (size_t k = 0; k < num_inputs; ++k) {
      const Tensor& first = batch.front().inputs[k].tensor;
      Shape shape = first.shape();
      shape[0] = total;
      Tensor t = Tensor::Empty(first.dtype(), shape);
      char* dst = static_cast<char*>(t.raw());
      for (const Pending& p : batch) {
        std::memcpy(dst, p.inputs[k].tensor.raw(), p.inputs[k].tensor.bytes());
        dst += p.inputs[k].tensor.bytes();
      }
      inputs.push_back({batch.front().inputs[k].name, std::move(t)});
    }
  }
  std::vector<NamedTensor> outputs;
  RunTimings timings;
  timings.per_node = trace_kernels.load(std::memory_order_relaxed);
  Status s = session->Run(inputs, &outputs, timings.per_node ? &timings : nullptr);
  const auto ran = BatchClock::now();
  for (const NamedTensor& o : outputs)
    if (s.ok() && policy.merge && (o.tensor.rank() < 1 || o.tensor.shape()[0] != total))
      s = Unsupported("output '" + o.name + "' is " + DataTypeName(o.tensor.dtype()) +
                      ShapeToString(o.tensor.shape()) + ": batching needs the batch (" +
                      std::to_string(total) + ") as its first dimension");
  // Scatter: each request gets its own rows, as a view of the batch's output that shares its
  // ownership (Run returns outputs of the run's own: nothing is copied).
  std::vector<std::vector<NamedTensor>> results(batch.size());
  if (s.ok()) {
    if (batch.size() == 1) {
      results[0] = std::move(outputs);
    } else {
      for (NamedTensor& o : outputs) {
        const size_t row = o.tensor.bytes() / static_cast<size_t>(total);
        auto owner = std::make_shared<Tensor>(std::move(o.tensor));
        char* src = static_cast<char*>(owner->raw());
        for (size_t r = 0; r < batch.size(); ++r) {
          Shape shape = owner->shape();
          shape[0] = batch[r].samples;
          results[r].push_back({o.name, Tensor::Adopt(owner->dtype(), shape, src, owner)});
          src += row * static_cast<size_t>(batch[r].samples);
        }
      }
    }
  }
  BatchEvent e;
  e.samples = total;
  e.compute_us = Micros(BatchClock::now() - start);
  e.ok = s.ok();
  for (const Pending& p : batch) e.queue_us.push_back(Micros(start - p.arrival));
  e.start_us = SinceEpochUs(start);
  e.thread = static_cast<int>(gettid());
  e.run = std::move(timings);
  Account(e, Micros(ran - start));
  for (size_t r = 0; r < batch.size(); ++r) {
    if (s.ok())
      batch[r].done(OkStatus(), std::move(results[r]));
    else
      batch[r].done(
          Status(s).AddContext("while running a batch of " + std::to_string(total) +
                               " samples from " + std::to_string(batch.size()) + " requests"),
          {});
  }
}

}  // namespace kiln
