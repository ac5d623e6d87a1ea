// ModelServer (model_server.h) and the Prometheus metrics through prometheus-cpp's core registry
// and text serializer (the server answers /metrics itself; no second listener).
#include "serving/model_server.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

namespace kiln::serving {

namespace {

using prometheus::Histogram;

// Seconds: 50 us .. 10 s, roughly x2.5 per bucket.
const Histogram::BucketBoundaries& TimeBuckets() {
  static const Histogram::BucketBoundaries b = {5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3,
                                                5e-3, 1e-2, 2.5e-2, 5e-2, 0.1,  0.25,
                                                0.5,  1,    2.5,    5,    10};
  return b;
}

uint64_t Nanos(double us) { return static_cast<uint64_t>(us * 1000.0); }

}  // namespace

// The metric families; names and meanings in docs/serving.md.
class Metrics {
 public:
  Metrics()
      : registry_(std::make_shared<prometheus::Registry>()),
        requests_(prometheus::BuildCounter()
                      .Name("kiln_requests_total")
                      .Help("Inference requests answered, by model, protocol and outcome")
                      .Register(*registry_)),
        request_seconds_(prometheus::BuildHistogram()
                             .Name("kiln_request_duration_seconds")
                             .Help("Inference request time from receipt to answer")
                             .Register(*registry_)),
        queue_seconds_(prometheus::BuildHistogram()
                           .Name("kiln_queue_duration_seconds")
                           .Help("Time a request waited in the batcher's queue")
                           .Register(*registry_)),
        compute_seconds_(prometheus::BuildHistogram()
                             .Name("kiln_compute_duration_seconds")
                             .Help("Time a batch took to run (gather, run, scatter)")
                             .Register(*registry_)),
        batch_size_(prometheus::BuildHistogram()
                        .Name("kiln_batch_size")
                        .Help("Samples per batch run")
                        .Register(*registry_)),
        queue_depth_(prometheus::BuildGauge()
                         .Name("kiln_queue_depth")
                         .Help("Requests waiting in the batcher's queue")
                         .Register(*registry_)),
        in_flight_(prometheus::BuildGauge()
                       .Name("kiln_inflight_requests")
                       .Help("Requests admitted and not yet answered")
                       .Register(*registry_)
                       .Add({})),
        ready_(prometheus::BuildGauge()
                   .Name("kiln_ready")
                   .Help("1 when the server is ready (warmed up and not draining)")
                   .Register(*registry_)
                   .Add({})) {}

  struct PerModel {
    Histogram* queue = nullptr;
    Histogram* compute = nullptr;
    Histogram* batch = nullptr;
    prometheus::Gauge* depth = nullptr;
  };

  void AddModel(const std::string& name, int max_batch) {
    std::lock_guard<std::mutex> lock(mu_);
    Histogram::BucketBoundaries sizes;
    for (int b = 1; b < max_batch; b *= 2) sizes.push_back(b);
    sizes.push_back(std::max(max_batch, 1));
    PerModel m;
    m.queue = &queue_seconds_.Add({{"model", name}}, TimeBuckets());
    m.compute = &compute_seconds_.Add({{"model", name}}, TimeBuckets());
    m.batch = &batch_size_.Add({{"model", name}}, sizes);
    m.depth = &queue_depth_.Add({{"model", name}});
    per_model_[name] = m;
  }

  void ObserveBatch(const std::string& model, const BatchEvent& e) {
    PerModel m;
    {
      std::lock_guard<std::mutex> lock(mu_);
      m = per_model_.at(model);
    }
    for (double q : e.queue_us) m.queue->Observe(q * 1e-6);
    m.compute->Observe(e.compute_us * 1e-6);
    m.batch->Observe(e.samples);
  }

  void ObserveRequest(const std::string& model, const char* protocol, const char* outcome,
                      double seconds) {
    requests_.Add({{"model", model}, {"protocol", protocol}, {"outcome", outcome}}).Increment();
    if (std::string(outcome) == "success")
      request_seconds_.Add({{"model", model}, {"protocol", protocol}}, TimeBuckets())
          .Observe(seconds);
  }

  std::string Text(const std::vector<ModelRef>& models, uint64_t in_flight, bool ready) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& m : models)
        per_model_.at(m->desc.name).depth->Set(static_cast<double>(m->queued()));
    }
    in_flight_.Set(static_cast<double>(in_flight));
    ready_.Set(ready ? 1 : 0);
    return prometheus::TextSerializer().Serialize(registry_->Collect());
  }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<Histogram>& request_seconds_;
  prometheus::Family<Histogram>& queue_seconds_;
  prometheus::Family<Histogram>& compute_seconds_;
  prometheus::Family<Histogram>& batch_size_;
  prometheus::Family<prometheus::Gauge>& queue_depth_;
  prometheus::Gauge& in_flight_;
  prometheus::Gauge& ready_;
  std::mutex mu_;
  // A model's metrics outlive its unloading (counters only grow); a reload reuses them.
  std::map<std::string, PerModel> per_model_;  // under mu_
};

const char* OutcomeOf(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return "success";
    case StatusCode::kInvalidArgument:
      return "invalid_argument";
    case StatusCode::kNotFound:
      return "not_found";
    case StatusCode::kUnavailable:
      return "queue_full";
    case StatusCode::kDeadlineExceeded:
      return "deadline_exceeded";
    case StatusCode::kCancelled:
      return "shutting_down";
    default:
      return "failed";
  }
}

const char kModelControlOff[] =
    "model control is off: kiln serve loads and unloads models only with "
    "--model-control-mode explicit";

StatusOr<std::unique_ptr<ModelServer>> ModelServer::Create(
    std::vector<ServedModel> models, const BatchPolicy& policy, int64_t queue_timeout_us,
    int instances, std::function<StatusOr<ServedModel>(const std::string&)> repository) {
  if (models.empty()) return InvalidArgument("kiln serve needs at least one model");
  if (instances < 1 || instances > 64)
    return InvalidArgument("instances must be in 1..64; got " + std::to_string(instances));
  if (queue_timeout_us < 0)
    return InvalidArgument("the queue timeout must be >= 0 us; got " +
                           std::to_string(queue_timeout_us));
  std::unique_ptr<ModelServer> server(new ModelServer());
  server->queue_timeout_us_ = queue_timeout_us;
  server->metrics_ = std::make_unique<Metrics>();
  server->policy_ = policy;
  server->instances_ = instances;
  server->repository_ = std::move(repository);
  for (ServedModel& sm : models) {
    if (server->models_.count(sm.name))
      return InvalidArgument("two models are named '" + sm.name + "'");
    const std::string name = sm.name;
    KILN_ASSIGN_OR_RETURN(auto m, server->MakeModel(std::move(sm)));
    server->models_[name] = std::move(m);
  }
  ModelServer* raw = server.get();
  server->control_thread_ = std::thread([raw] { raw->RunControl(); });
  return server;
}

StatusOr<std::shared_ptr<Model>> ModelServer::MakeModel(ServedModel sm) {
  if (sm.name.empty() || sm.name.find('/') != std::string::npos)
    return InvalidArgument("model name '" + sm.name + "' must be non-empty and hold no '/'");
  if (!sm.session) return InvalidArgument("model '" + sm.name + "' has no session");
  auto m = std::make_shared<Model>();
  m->session = std::move(sm.session);
  m->desc.name = sm.name;
  m->desc.version = sm.version;
  m->desc.inputs = m->session->inputs();
  m->desc.outputs = m->session->outputs();
  bool batchable = !m->desc.inputs.empty();
  for (const TensorSpec& s : m->desc.inputs)
    if (s.dims.empty() || s.dims[0] >= 0) batchable = false;
  BatchPolicy p = policy_;
  p.merge = batchable;
  m->desc.policy = p;
  m->desc.max_batch_size = batchable ? p.max_batch : 0;
  m->desc.instances = instances_;
  metrics_->AddModel(sm.name, m->desc.max_batch_size);
  Metrics* metrics = metrics_.get();
  Model* raw = m.get();
  auto observe = [this, metrics, raw](const BatchEvent& e) {
    metrics->ObserveBatch(raw->desc.name, e);
    {
      std::lock_guard<std::mutex> lock(trace_mu_);
      if (tracing_) {
        if (trace_.size() < kMaxTraceBatches)
          trace_.emplace_back(raw->desc.name, e);
        else
          ++trace_dropped_;
      }
    }
    std::lock_guard<std::mutex> lock(raw->mu);
    ModelCounters& c = raw->counters;
    c.execution_count += 1;
    c.inference_count += static_cast<uint64_t>(e.samples);
    c.compute_count += e.queue_us.size();
    c.compute_ns += Nanos(e.compute_us) * e.queue_us.size();
    for (double q : e.queue_us) {
      c.queue_count += 1;
      c.queue_ns += Nanos(q);
    }
    auto& b = c.batch_stats[e.samples];
    b.first += 1;
    b.second += Nanos(e.compute_us);
    c.last_inference_ms =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());
  };
  for (int k = 0; k < instances_; ++k) {
    auto batcher = DynamicBatcher::Create(*m->session, p);
    if (!batcher.ok())
      return Status(batcher.status()).AddContext("while serving model '" + sm.name + "'");
    (*batcher)->SetObserver(observe);
    {
      std::lock_guard<std::mutex> lock(trace_mu_);
      (*batcher)->SetTraceKernels(tracing_);
    }
    m->batchers.push_back(std::move(*batcher));
  }
  return m;
}

Model::~Model() {
  for (auto& b : batchers) b->Shutdown();
}

ModelServer::~ModelServer() {
  StopControl();
  StopBatchers();
}

void ModelServer::Control(const std::string& name, bool load, std::function<void(Status)> done) {
  {
    std::lock_guard<std::mutex> lock(tasks_mu_);
    if (!tasks_stop_) {
      tasks_.push_back([this, name, load, done = std::move(done)] {
        const Status s = load ? Load(name) : Unload(name);
        std::fprintf(stderr, "kiln serve: %s model '%s': %s\n", load ? "load" : "unload",
                     name.c_str(), s.ok() ? "done" : s.ToString().c_str());
        done(s);
      });
      tasks_cv_.notify_one();
      return;
    }
  }
  done(Status(StatusCode::kCancelled, "the server is shutting down"));
}

void ModelServer::RunControl() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(tasks_mu_);
      tasks_cv_.wait(lock, [this] { return tasks_stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void ModelServer::StopControl() {
  {
    std::lock_guard<std::mutex> lock(tasks_mu_);
    tasks_stop_ = true;
    tasks_cv_.notify_one();
  }
  if (control_thread_.joinable()) control_thread_.join();
}

std::vector<RepositoryEntry> ModelServer::RepositoryIndex(bool ready_only) const {
  const bool ready_now = ready();
  std::vector<RepositoryEntry> list;
  if (ready_only && !ready_now) return list;
  for (const ModelRef& m : models())
    list.push_back({m->desc.name, m->desc.version, ready_now ? "READY" : "UNAVAILABLE", ""});
  if (!ready_only)
    for (const std::string& name : unloaded())
      list.push_back({name, "", "UNAVAILABLE", "unloaded"});
  return list;
}

void ModelServer::StopBatchers() {
  for (const ModelRef& m : models())
    for (auto& b : m->batchers) b->Shutdown();
}

void ModelServer::Retire(const std::shared_ptr<Model>& m, int64_t timeout_ms) {
  // Find() no longer returns `m`, so its references only go: each request that found it holds
  // one until answered. Once only this one is left (or at the timeout), the batchers stop; a
  // request still arriving then is refused (Unavailable), the queued ones are answered.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (m.use_count() > 1 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (auto& b : m->batchers) b->Shutdown();
}

Status ModelServer::Load(const std::string& name) {
  if (!repository_) return Unsupported(kModelControlOff);
  if (draining_.load()) return Status(StatusCode::kCancelled, "the server is shutting down");
  std::lock_guard<std::mutex> control(control_mu_);
  KILN_ASSIGN_OR_RETURN(ServedModel sm, repository_(name));
  if (sm.name != name)
    return Internal("the repository answered model '" + sm.name + "' for '" + name + "'");
  KILN_ASSIGN_OR_RETURN(auto m, MakeModel(std::move(sm)));
  KILN_RETURN_IF_ERROR(WarmModel(*m));
  std::shared_ptr<Model> old;
  {
    std::lock_guard<std::mutex> lock(models_mu_);
    std::shared_ptr<Model>& slot = models_[name];
    old = std::move(slot);
    slot = std::move(m);
    unloaded_.erase(name);
  }
  if (old) Retire(old, retire_timeout_ms_);
  return OkStatus();
}

Status ModelServer::Unload(const std::string& name) {
  if (!repository_) return Unsupported(kModelControlOff);
  std::lock_guard<std::mutex> control(control_mu_);
  std::shared_ptr<Model> old;
  {
    std::lock_guard<std::mutex> lock(models_mu_);
    auto it = models_.find(name);
    if (it == models_.end()) return NotFound("model '" + name + "' is not loaded");
    old = std::move(it->second);
    models_.erase(it);
    unloaded_.insert(name);
  }
  Retire(old, retire_timeout_ms_);
  return OkStatus();
}

void ModelServer::StartTrace() {
  std::lock_guard<std::mutex> lock(trace_mu_);
  tracing_ = true;
  trace_.clear();
  trace_dropped_ = 0;
  for (const ModelRef& m : models())
    for (const auto& b : m->batchers) b->SetTraceKernels(true);
}

std::string ModelServer::StopTrace() {
  std::vector<std::pair<std::string, BatchEvent>> kept;
  size_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(trace_mu_);
    tracing_ = false;
    kept.swap(trace_);
    dropped = trace_dropped_;
    for (const ModelRef& m : models())
      for (const auto& b : m->batchers) b->SetTraceKernels(false);
  }
  using Json = nlohmann::json;
  double origin = 0;
  for (size_t i = 0; i < kept.size(); ++i) {
    const BatchEvent& e = kept[i].second;
    double first = e.start_us;
    for (double q : e.queue_us) first = std::min(first, e.start_us - q);
    origin = i == 0 ? first : std::min(origin, first);
  }
  Json events = Json::array();
  std::map<int, std::string> threads;
  uint64_t id = 0;
  for (const auto& [model, e] : kept) {
    threads[e.thread] = "batcher " + model;
    events.push_back({{"name", "batch " + std::to_string(e.samples)},
                      {"cat", "batch"},
                      {"ph", "X"},
                      {"ts", e.start_us - origin},
                      {"dur", e.compute_us},
                      {"pid", 1},
                      {"tid", e.thread},
                      {"args",
                       {{"model", model},
                        {"samples", e.samples},
                        {"requests", e.queue_us.size()},
                        {"ok", e.ok}}}});
    for (double q : e.queue_us) {  // arrival to batch start, as an async slice per request
      ++id;
      Json wait = {{"name", "queue " + model},
                   {"cat", "queue"},
                   {"id", id},
                   {"pid", 1},
                   {"tid", e.thread},
                   {"args", {{"model", model}, {"wait_us", q}}}};
      wait["ph"] = "b";
      wait["ts"] = e.start_us - q - origin;
      events.push_back(wait);
      wait["ph"] = "e";
      wait["ts"] = e.start_us - origin;
      events.push_back(wait);
    }
    for (const NodeTime& n : e.run.nodes)
      events.push_back({{"name", n.node.empty() ? n.op_type : n.op_type + " " + n.node},
                        {"cat", n.kernel},
                        {"ph", "X"},
                        {"ts", n.start_us - origin},
                        {"dur", n.ms * 1000.0},
                        {"pid", 1},
                        {"tid", e.thread},
                        {"args",
                         {{"node", n.node},
                          {"op", n.op_type},
                          {"kernel", n.kernel},
                          {"outputs", n.outputs},
                          {"model", model}}}});
  }
  std::stable_sort(events.begin(), events.end(), [](const Json& a, const Json& b) {
    return a["ts"].get<double>() < b["ts"].get<double>();
  });
  Json meta = Json::array();
  meta.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "kiln serve"}}}});
  for (const auto& [tid, name] : threads)
    meta.push_back({{"name", "thread_name"},
                    {"ph", "M"},
                    {"pid", 1},
                    {"tid", tid},
                    {"args", {{"name", name}}}});
  events.insert(events.begin(), meta.begin(), meta.end());
  Json doc = {{"traceEvents", events},
              {"displayTimeUnit", "ms"},
              {"otherData", {{"batches", kept.size()}, {"batches_dropped", dropped}}}};
  return doc.dump(1);
}

std::vector<ModelRef> ModelServer::models() const {
  std::lock_guard<std::mutex> lock(models_mu_);
  std::vector<ModelRef> list;
  for (const auto& [name, m] : models_) list.push_back(m);
  return list;
}

std::vector<std::string> ModelServer::unloaded() const {
  std::lock_guard<std::mutex> lock(models_mu_);
  return {unloaded_.begin(), unloaded_.end()};
}

size_t Model::queued() const {
  size_t n = 0;
  for (const auto& b : batchers) n += b->stats().queued;
  return n;
}

ModelRef ModelServer::Find(const std::string& name, const std::string& version) const {
  std::lock_guard<std::mutex> lock(models_mu_);
  auto it = models_.find(name);
  if (it == models_.end() || !(version.empty() || version == it->second->desc.version))
    return nullptr;
  return it->second;
}

std::shared_ptr<void> ModelServer::Admit() {
  {
    std::lock_guard<std::mutex> lock(admission_->mu);
    if (draining_.load()) return nullptr;
    ++admission_->in_flight;
  }
  return std::shared_ptr<void>(reinterpret_cast<void*>(1), [a = admission_](void*) {
    std::lock_guard<std::mutex> lock(a->mu);
    --a->in_flight;
    a->changed.notify_all();
  });
}

void ModelServer::Infer(const Model& model, std::vector<NamedTensor> inputs, int64_t timeout_us,
                        int priority, DynamicBatcher::Done done) {
  RequestOptions options;
  if (timeout_us <= 0) timeout_us = queue_timeout_us_;
  if (timeout_us > 0) options.deadline = BatchClock::now() + std::chrono::microseconds(timeout_us);
  options.priority = priority;
  // The least loaded instance (queued requests, plus one while it runs a batch); among equals,
  // the next in turn.
  const size_t n = model.batchers.size();
  const size_t start = model.next.fetch_add(1) % n;
  size_t best = start, best_queued = SIZE_MAX;
  for (size_t i = 0; i < n && n > 1; ++i) {
    const size_t k = (start + i) % n;
    const BatcherStats st = model.batchers[k]->stats();
    const size_t q = st.queued + (st.busy ? 1 : 0);
    if (q < best_queued) {
      best = k;
      best_queued = q;
    }
  }
  (void)model.batchers[best]->Submit(std::move(inputs), std::move(done), options);
}

void ModelServer::Record(const Model* model, const char* protocol, const Status& s,
                         double seconds) {
  const std::string name = model ? model->desc.name : "";
  metrics_->ObserveRequest(name, protocol, OutcomeOf(s), seconds);
  if (!model) return;
  std::lock_guard<std::mutex> lock(model->mu);
  ModelCounters& c = const_cast<Model*>(model)->counters;
  if (s.ok()) {
    c.success_count += 1;
    c.success_ns += static_cast<uint64_t>(seconds * 1e9);
  } else {
    c.fail_count += 1;
    c.fail_ns += static_cast<uint64_t>(seconds * 1e9);
  }
}

Status ModelServer::WarmModel(const Model& m) const {
  if (!prepare_) return OkStatus();
  const ModelDescription& d = m.desc;
  for (const TensorSpec& s : d.inputs)
    for (size_t k = d.max_batch_size > 0 ? 1 : 0; k < s.dims.size(); ++k)
      if (s.dims[k] < 0) return OkStatus();  // shapes unknown until requests arrive
  const int sizes = std::max(d.max_batch_size, 1);
  for (int b = 1; b <= sizes; ++b) {
    if (draining_.load()) break;
    std::vector<std::pair<std::string, Shape>> shapes;
    for (const TensorSpec& s : d.inputs) {
      Shape shape(s.dims.begin(), s.dims.end());
      if (d.max_batch_size > 0) shape[0] = b;
      shapes.emplace_back(s.name, shape);
    }
    Status st = m.session->Prepare(shapes);
    if (!st.ok())
      return st.AddContext("while warming model '" + d.name + "' at batch " + std::to_string(b));
  }
  return OkStatus();
}

void ModelServer::WarmUp(bool prepare) {
  prepare_ = prepare;
  Status first;
  for (const ModelRef& m : models()) {
    if (!prepare || draining_.load() || !first.ok()) break;
    first = WarmModel(*m);
  }
  std::lock_guard<std::mutex> lock(mu_);
  warmed_ = true;
  warm_status_ = first;
  ready_.store(first.ok());
  changed_.notify_all();
}

Status ModelServer::WaitReady() const {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [this] { return warmed_; });
  return warm_status_;
}

DrainReport ModelServer::Drain(int64_t timeout_ms) {
  const auto start = std::chrono::steady_clock::now();
  DrainReport r;
  Admission& a = *admission_;
  std::unique_lock<std::mutex> lock(a.mu);
  draining_.store(true);
  r.in_flight_at_start = a.in_flight;
  a.changed.wait_until(lock, start + std::chrono::milliseconds(timeout_ms),
                       [&a] { return a.in_flight == 0; });
  r.unfinished = a.in_flight;
  r.elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return r;
}

std::vector<std::pair<ModelDescription, ModelCounters>> ModelServer::Counters(
    const Model* only) const {
  std::vector<std::pair<ModelDescription, ModelCounters>> list;
  for (const ModelRef& m : models()) {
    if (only && only != m.get()) continue;
    std::lock_guard<std::mutex> lock(m->mu);
    list.emplace_back(m->desc, m->counters);
  }
  return list;
}

std::string ModelServer::MetricsText() const {
  uint64_t in_flight;
  {
    std::lock_guard<std::mutex> lock(admission_->mu);
    in_flight = admission_->in_flight;
  }
  return metrics_->Text(models(), in_flight, ready());
}

}  // namespace kiln::serving
