// The protocol-independent part of `kiln serve`: the served models (each a Session behind a
// DynamicBatcher), warm-up and readiness, admission and the drain, per-model counters (Triton's
// statistics) and the Prometheus metrics. The HTTP front end (http_server.cc) and any other
// translate requests into ModelServer::Infer calls.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kiln/batcher.h"
#include "kiln/server.h"
#include "serving/kserve.h"

namespace kiln::serving {

class Metrics;

struct Model {
  ~Model();  // shuts the batchers down (a no-op when Retire did)
  ModelDescription desc;
  std::shared_ptr<const Session> session;
  // One per instance; a request goes to the one with the shortest queue.
  std::vector<std::unique_ptr<DynamicBatcher>> batchers;
  mutable std::atomic<size_t> next{0};  // round-robin among equally short queues
  size_t queued() const;
  mutable std::mutex mu;
  ModelCounters counters;  // under mu
};

// A served model, held by each request that uses it: an unloaded or replaced model lives until
// its last request has been answered.
using ModelRef = std::shared_ptr<const Model>;

// "success", "invalid_argument", "queue_full", "shutting_down", "deadline_exceeded", "failed".
const char* OutcomeOf(const Status& s);

// One line of Triton's repository index: a served model (state READY, or UNAVAILABLE while the
// server is not ready) or an unloaded one (UNAVAILABLE, reason "unloaded", no version).
struct RepositoryEntry {
  std::string name;
  std::string version;
  std::string state;
  std::string reason;
};

// Why a load or unload is refused when model control is off (both front ends answer it).
extern const char kModelControlOff[];

class ModelServer {
 public:
  // `queue_timeout_us`: the deadline of requests that set none (0: none).
  // `instances`: batchers per model over the one session (batches in flight at once).
  // `repository`: loads a model by name for Load() (model control); null refuses it.
  static StatusOr<std::unique_ptr<ModelServer>> Create(
      std::vector<ServedModel> models, const BatchPolicy& policy, int64_t queue_timeout_us = 0,
      int instances = 1, std::function<StatusOr<ServedModel>(const std::string&)> repository = {});
  ~ModelServer();

  // The model by name; version "" or the served one. nullptr when there is none.
  ModelRef Find(const std::string& name, const std::string& version) const;
  std::vector<ModelRef> models() const;  // the models served now, by name
  // Names unloaded and not loaded again (the repository index lists them as UNAVAILABLE).
  std::vector<std::string> unloaded() const;

  // Model control (Triton's explicit mode): loads `name` from the repository, warms it, and
  // serves it; a served model of that name is replaced once the new one is ready (requests keep
  // going to the old one until then, and those it holds are answered). Unload stops serving
  // `name`: new requests get NotFound, queued ones are answered, and its memory goes with its
  // last request. Both block until done; one at a time.
  Status Load(const std::string& name);
  Status Unload(const std::string& name);
  bool model_control() const { return static_cast<bool>(repository_); }
  // Load (`load` true) or Unload of `name` on the server's control thread, one after another in
  // the order asked, so that no front-end thread waits for a load; logs the outcome to stderr.
  // `done` runs once with the result: on the control thread, or on the caller's (Cancelled,
  // "the server is shutting down") once StopControl has run.
  void Control(const std::string& name, bool load, std::function<void(Status)> done);
  // Runs what Control was asked before, then refuses more; joins the control thread.
  void StopControl();
  // The repository index: the served models, then the unloaded ones; only the READY entries
  // when `ready_only` (Triton's {"ready": true}).
  std::vector<RepositoryEntry> RepositoryIndex(bool ready_only) const;

  // Admission: a token held until the request's answer is written, or nullptr while draining
  // (the caller answers 503 / UNAVAILABLE).
  std::shared_ptr<void> Admit();
  // Queues the request on the model's batcher; `done` runs once (on the batcher's thread, or on
  // the caller's when refused at once).
  // `timeout_us` > 0 sets a deadline; `priority`: lower runs first.
  void Infer(const Model& model, std::vector<NamedTensor> inputs, int64_t timeout_us, int priority,
             DynamicBatcher::Done done);
  // Counts a finished request (counters and metrics): protocol "http" or "grpc", and its
  // duration from receipt to answer.
  void Record(const Model* model, const char* protocol, const Status& s, double seconds);

  // Prepares every batch size 1..max_batch of each model whose non-batch dims are all fixed;
  // ready() after. The first failure is kept and returned by WaitReady().
  void WarmUp(bool prepare);
  bool ready() const { return ready_.load() && !draining_.load(); }
  Status WaitReady() const;
  bool draining() const { return draining_.load(); }
  // Not ready, refuse new requests, wait for every admitted one (at most timeout_ms).
  DrainReport Drain(int64_t timeout_ms);

  // Each model's description and counters (only `only`, when set).
  std::vector<std::pair<ModelDescription, ModelCounters>> Counters(const Model* only) const;
  std::string StatsJson(const Model* only) const { return ModelStatsJson(Counters(only)); }
  std::string MetricsText() const;
  // Runs what the batchers hold, then refuses everything (Unavailable): the last step before the
  // front ends stop.
  void StopBatchers();

  // Tracing (kiln serve --trace): from StartTrace, every batch of every model is kept (at most
  // kMaxTraceBatches) with per-kernel timings of its run; StopTrace ends it and returns Chrome/
  // Perfetto trace JSON: a slice per batch on its batcher thread (model, samples, requests)
  // holding a slice per kernel, and each request's queue wait as an async slice.
  void StartTrace();
  std::string StopTrace();
  static constexpr size_t kMaxTraceBatches = 10000;

 private:
  ModelServer() = default;

  // Shared with the admission tokens, which may outlive the server (a token in an answer that was
  // never written when the front end stopped).
  struct Admission {
    std::mutex mu;
    std::condition_variable changed;
    uint64_t in_flight = 0;
  };

  StatusOr<std::shared_ptr<Model>> MakeModel(ServedModel sm);
  void RunControl();  // the control thread: Control()'s tasks in order, until StopControl
  Status WarmModel(const Model& m) const;
  static void Retire(const std::shared_ptr<Model>& m, int64_t timeout_ms);
  int64_t retire_timeout_ms_ = 30000;  // how long an unloaded model's requests may take

  // Declared before the models: their batchers (whose observers append here) stop first.
  std::mutex trace_mu_;
  bool tracing_ = false;                                   // under trace_mu_
  std::vector<std::pair<std::string, BatchEvent>> trace_;  // under trace_mu_
  size_t trace_dropped_ = 0;                               // under trace_mu_

  mutable std::mutex models_mu_;
  std::map<std::string, std::shared_ptr<Model>> models_;  // under models_mu_
  std::set<std::string> unloaded_;                        // under models_mu_
  std::mutex control_mu_;                                 // one Load/Unload at a time
  // Control()'s queue and thread.
  std::mutex tasks_mu_;
  std::condition_variable tasks_cv_;
  std::deque<std::function<void()>> tasks_;  // under tasks_mu_
  bool tasks_stop_ = false;                  // under tasks_mu_
  std::thread control_thread_;
  std::function<StatusOr<ServedModel>(const std::string&)> repository_;
  BatchPolicy policy_;
  int instances_ = 1;
  std::atomic<bool> prepare_{true};  // WarmUp's argument, for models loaded later
  std::unique_ptr<Metrics> metrics_;
  int64_t queue_timeout_us_ = 0;
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  bool warmed_ = false;  // under mu_
  Status warm_status_;   // under mu_
  std::shared_ptr<Admission> admission_ = std::make_shared<Admission>();
};

}  // namespace kiln::serving
