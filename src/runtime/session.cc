#include "kiln/session.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <thread>

#include "core/shape_span.h"
#include "kiln/inspect.h"
#include "onnx/onnx_loader.h"
#include "passes/lower_float16.h"
#include "passes/pass_manager.h"
#include "runtime/executor.h"
#include "runtime/half_values.h"
#include "runtime/model_store.h"
#include "runtime/planner.h"
#include "runtime/plugin.h"
#include "runtime/session_access.h"

namespace kiln {

std::string TensorSpec::ToString() const {
  std::string s = DataTypeName(dtype);
  if (!rank_known) return s + "[?]";
  s += "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    // dim_names may be shorter than dims in a spec a caller built (a public struct).
    const bool named = i < dim_names.size() && !dim_names[i].empty();
    s += dims[i] >= 0 ? std::to_string(dims[i]) : (named ? dim_names[i] : "?");
  }
  return s + "]";
}

struct Session::Impl {
  SessionOptions options;
  std::shared_ptr<runtime::Device> device;
  std::shared_ptr<const runtime::Model> model;  // in a runtime::SharedModel
  size_t constant_bytes = 0;                    // the optimized graph's constants
  bool weights_shared = false;                  // found in the model store (another session's)
  std::vector<TensorSpec> inputs, outputs;
  std::vector<std::string> optimization_log;
  mutable std::mutex mu;
  struct CachedPlan {
    std::shared_ptr<const runtime::Executor> plan;  // runs its immutable ExecutionPlan
    uint64_t last_used = 0;  // `uses` when last found or made (least recently used goes first)
  };
  mutable std::map<std::vector<Shape>, CachedPlan> plans;
  mutable uint64_t uses = 0;
  mutable uint64_t evicted = 0;
  std::string model_hash;  // with a plan cache: the model file's content hash
  // Packed weights and CPU arenas shared by every plan of this session.
  std::shared_ptr<runtime::SessionResources> resources =
      std::make_shared<runtime::SessionResources>();
  mutable std::string plan_cache_status = "off";

  ModelMetadata metadata;

  // Checks the given inputs against the model's and points (*ordered)[k] at graph input k's
  // tensor. Nothing is allocated once *ordered has the capacity; messages are built on error only.
  Status BindInputs(const std::vector<NamedTensor>& given,
                    std::vector<const Tensor*>* ordered) const;
  // Checks caller-owned outputs (Session::RunInto) and points (*bound)[k] at graph output k's
  // tensor, or null where the caller named none.
  Status BindOutputs(std::vector<NamedTensor>* given, std::vector<Tensor*>* bound) const;
  // The executor of the plan for these input shapes, planned on first use.
  StatusOr<std::shared_ptr<const runtime::Executor>> PlanFor(
      const std::vector<const Tensor*>& ordered) const;
};

namespace {

ModelMetadata MetadataOf(const ir::Graph& g) {
  ModelMetadata md;
  md.producer_name = g.producer_name;
  md.producer_version = g.producer_version;
  md.domain = g.domain;
  md.model_version = g.model_version;
  md.doc_string = g.doc_string;
  md.graph_name = g.name;
  md.graph_doc_string = g.graph_doc_string;
  md.ir_version = g.ir_version;
  md.opset_imports.assign(g.opset_imports.begin(), g.opset_imports.end());
  md.custom = g.metadata_props;
  return md;
}

std::vector<std::pair<std::string, int>> OpCounts(const ir::Graph& g) {
  std::map<std::string, int> hist;
  for (const auto& n : g.nodes) hist[(n.domain.empty() ? "" : n.domain + ".") + n.op_type]++;
  return {hist.begin(), hist.end()};
}

TensorSpec SpecOf(const ir::Value& v) {
  TensorSpec s;
  s.name = v.name;
  s.dtype = v.dtype;
  if (v.shape) {
    s.rank_known = true;
    for (const auto& d : *v.shape) {
      s.dims.push_back(d.fixed() ? d.value : -1);
      s.dim_names.push_back(d.param);
    }
  }
  return s;
}

// The graph optimized under `options` and built into a model, ready to share.
StatusOr<std::shared_ptr<runtime::SharedModel>> BuildShared(
    StatusOr<std::unique_ptr<ir::Graph>> graph, const SessionOptions& options) {
  if (!graph.ok()) return graph.status();
  std::vector<std::string> pass_log;
  std::string lowered;
  KILN_RETURN_IF_ERROR(passes::LowerHalfFloats(**graph, &lowered));
  if (!lowered.empty()) pass_log.push_back("lower_float16: " + lowered);
  if (options.optimize) KILN_RETURN_IF_ERROR(passes::RunDefaultPasses(**graph, options, &pass_log));
  if (options.precision == Precision::kFp16) {
    std::string half;
    KILN_RETURN_IF_ERROR(runtime::StoreHalfBetweenKernels(**graph, options.backend, &half));
    if (!half.empty()) pass_log.push_back("half_values: " + half);
  }
  KILN_ASSIGN_OR_RETURN(auto model, runtime::BuildModel(std::move(graph).value()));
  if (!model->unsupported.empty()) return runtime::UnsupportedNodesError(model->unsupported);
  return runtime::MakeSharedModel(std::move(*model), std::move(pass_log));
}

// A session's state over a (possibly shared) model.
std::unique_ptr<Session::Impl> ImplOver(std::shared_ptr<runtime::SharedModel> shared,
                                        const SessionOptions& options,
                                        std::shared_ptr<runtime::Device> device) {
  auto impl = std::make_unique<Session::Impl>();
  impl->options = options;
  impl->device = std::move(device);
  impl->optimization_log = shared->optimization_log;
  const ir::Graph& g = *shared->model.graph;
  impl->metadata = MetadataOf(g);
  for (int id : g.inputs) impl->inputs.push_back(SpecOf(g.values[id]));
  for (int id : g.outputs) impl->outputs.push_back(SpecOf(g.values[id]));
  // Both alias `shared`: the model and its packed weights live while any session or plan does.
  impl->resources->weights = std::shared_ptr<runtime::WeightCache>(shared, &shared->weights);
  impl->model = std::shared_ptr<const runtime::Model>(shared, &shared->model);
  for (const ir::Value& v : g.values)
    if (v.constant) impl->constant_bytes += v.constant->bytes();
  return impl;
}

// Loads a model through the process's model store (runtime/model_store.h) or, with
// share_weights off, on its own. `sha256`: the digest of the model bytes ("" when unknown: not
// shared); `load` parses them; `model_dir` resolves external data.
StatusOr<std::unique_ptr<Session::Impl>> LoadImplShared(
    const std::string& sha256, const std::string& model_dir,
    const std::function<StatusOr<std::unique_ptr<ir::Graph>>()>& load,
    const SessionOptions& options) {
  // A thread count far beyond any machine is a mistake, not a wish: OpenMP would try to start
  // that many threads at the first run.
  const int max_threads = std::max(1024, 4 * static_cast<int>(std::thread::hardware_concurrency()));
  if (options.num_threads > max_threads)
    return InvalidArgument("num_threads must be at most " + std::to_string(max_threads) +
                           " (0: the CPUs this process may use); got " +
                           std::to_string(options.num_threads));
  KILN_ASSIGN_OR_RETURN(auto device, runtime::OpenDevice(options.backend, options.device_index));
  KILN_RETURN_IF_ERROR(runtime::CheckPrecision(options.backend, options.precision));
  const bool share = options.share_weights && !sha256.empty();
  const std::string key = share ? runtime::ModelStoreKey(sha256, options) : "";
  runtime::ModelStore& store = runtime::ModelStore::Global();
  std::shared_ptr<runtime::SharedModel> shared = share ? store.Find(key, model_dir) : nullptr;
  bool found = shared != nullptr;  // another session's copy
  if (!found) {
    StatusOr<std::unique_ptr<ir::Graph>> graph = load();
    std::vector<std::string> external;
    if (graph.ok()) external = (*graph)->external_data;
    auto built = BuildShared(std::move(graph), options);
    // The parse's buffers (a copy of every weight) are free now: back to the system with them,
    // or a process that loads models on other threads keeps them in its allocator's heaps.
    runtime::ReleaseFreeMemory();
    KILN_ASSIGN_OR_RETURN(shared, std::move(built));
    std::vector<runtime::FileIdentity> files;
    bool known = share;
    for (const std::string& loc : external) {
      auto id = runtime::IdentifyFile(model_dir, loc);
      if (id.ok())
        files.push_back(*id);
      else
        known = false;  // read a moment ago, gone now: used, not shared
    }
    if (known) {
      const runtime::SharedModel* made = shared.get();
      shared = store.Add(key, model_dir, std::move(files), std::move(shared));
      // Another thread loaded the same model meanwhile: its copy is used, this one dropped.
      found = shared.get() != made;
    }
  }
  auto impl = ImplOver(std::move(shared), options, device);
  impl->weights_shared = found;
  return impl;
}

// The index of the spec named `name`; else InvalidArgument listing the names (`kind`: "input" or
// "output").
StatusOr<size_t> FindSpec(const std::vector<TensorSpec>& specs, const std::string& name,
                          const char* kind) {
  for (size_t k = 0; k < specs.size(); ++k)
    if (specs[k].name == name) return k;
  std::string names;
  for (const auto& s : specs) names += (names.empty() ? "'" : ", '") + s.name + "'";
  return InvalidArgument("unknown " + std::string(kind) + " '" + name + "'; the model's " + kind +
                         "s are " + names);
}

// A sequence's or optional's items have the type it declares (a caller-made value may not), and
// string tensors have their elements.
Status CheckItems(const std::string& name, const Tensor& t) {
  if (t.dtype() == DataType::kString && t.numel() > 0 && t.raw() == nullptr)
    return InvalidArgument("input '" + name + "': a string tensor without storage");
  if (!IsSequenceType(t.dtype()) && !IsOptionalType(t.dtype())) return OkStatus();
  if (IsOptionalType(t.dtype()) && t.items().size() > 1)
    return InvalidArgument("input '" + name + "': an optional holds at most one value");
  for (size_t i = 0; i < t.items().size(); ++i) {
    const Tensor& item = t.items()[i];
    if (item.dtype() != ContainedType(t.dtype()))
      return InvalidArgument("input '" + name + "': item " + std::to_string(i) + " is " +
                             DataTypeName(item.dtype()) + ", the " + DataTypeName(t.dtype()) +
                             " needs " + DataTypeName(ContainedType(t.dtype())));
    KILN_RETURN_IF_ERROR(CheckItems(name, item));
  }
  return OkStatus();
}

}  // namespace

Status Session::Impl::BindInputs(const std::vector<NamedTensor>& given,
                                 std::vector<const Tensor*>* ordered) const {
  ordered->assign(inputs.size(), nullptr);
  for (const auto& nt : given) {
    KILN_ASSIGN_OR_RETURN(const size_t k, FindSpec(inputs, nt.name, "input"));
    if ((*ordered)[k] != nullptr)
      return InvalidArgument("input '" + nt.name + "' is given more than once");
    const TensorSpec& spec = inputs[k];
    const Tensor& t = nt.tensor;
    auto expected = [&] { return "expected " + spec.ToString(); };
    auto got = [&] {
      return "got " + std::string(DataTypeName(t.dtype())) + ShapeToString(t.shape());
    };
    if (spec.dtype != DataType::kUndefined && t.dtype() != spec.dtype)
      return InvalidArgument("input '" + nt.name + "': wrong dtype; " + expected() + ", " + got());
    if (!IsSupportedDataType(t.dtype()) && !IsIoDataType(t.dtype()))
      return InvalidArgument("input '" + nt.name + "': dtype " + DataTypeName(t.dtype()) +
                             " is not supported");
    KILN_RETURN_IF_ERROR(CheckItems(nt.name, t));
    if (spec.rank_known) {
      if (t.rank() != static_cast<int64_t>(spec.dims.size()))
        return InvalidArgument("input '" + nt.name + "': wrong rank; " + expected() + ", " + got());
      for (size_t d = 0; d < spec.dims.size(); ++d)
        if (spec.dims[d] >= 0 && spec.dims[d] != t.shape()[d])
          return InvalidArgument("input '" + nt.name + "': dimension " + std::to_string(d) +
                                 " must be " + std::to_string(spec.dims[d]) + "; " + expected() +
                                 ", " + got());
    }
    for (int64_t d : t.shape())
      if (d < 0) return InvalidArgument("input '" + nt.name + "': negative dimension; " + got());
    if (!ShapeSpanFits(t.shape()))
      return InvalidArgument("input '" + nt.name +
                             "': its dims (zeros counted as 1) multiply past 2^48; " + got());
    (*ordered)[k] = &t;
  }
  for (size_t k = 0; k < inputs.size(); ++k)
    if ((*ordered)[k] == nullptr)
      return InvalidArgument("missing input '" + inputs[k].name + "' (expected " +
                             inputs[k].ToString() + ")");
  return OkStatus();
}

Status Session::Impl::BindOutputs(std::vector<NamedTensor>* given,
                                  std::vector<Tensor*>* bound) const {
  bound->assign(outputs.size(), nullptr);
  for (NamedTensor& nt : *given) {
    KILN_ASSIGN_OR_RETURN(const size_t k, FindSpec(outputs, nt.name, "output"));
    if ((*bound)[k] != nullptr)
      return InvalidArgument("output '" + nt.name + "' is bound more than once");
    const TensorSpec& spec = outputs[k];
    Tensor& t = nt.tensor;
    if (spec.dtype != DataType::kUndefined && t.dtype() != spec.dtype)
      return InvalidArgument("output '" + nt.name + "': the bound tensor is " +
                             DataTypeName(t.dtype()) + ShapeToString(t.shape()) + "; expected " +
                             spec.ToString());
    if (t.raw() == nullptr && t.bytes() > 0)
      return InvalidArgument("output '" + nt.name + "': the bound tensor has no storage");
    (*bound)[k] = &t;
  }
  return OkStatus();
}

StatusOr<std::shared_ptr<const runtime::Executor>> Session::Impl::PlanFor(
    const std::vector<const Tensor*>& ordered) const {
  {
    // Compared in place (a run builds no key): a session holds at most max_plans plans.
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [shapes, cached] : plans) {
      size_t k = 0;
      while (k < ordered.size() && shapes[k] == ordered[k]->shape()) ++k;
      if (k == ordered.size()) {
        cached.last_used = ++uses;
        return cached.plan;
      }
    }
  }
  std::vector<Shape> sig;
  std::vector<Tensor> given;
  for (const Tensor* t : ordered) {
    sig.push_back(t->shape());
    given.push_back(*t);
  }
  const bool cache = options.tune && !options.plan_cache_dir.empty() && !model_hash.empty();
  std::string key;
  runtime::PlanCacheLookupResult found;
  if (cache) {
    key = runtime::PlanCacheKey(model_hash, sig, options, device ? device->Describe() : "",
                                runtime::LibraryVersions(options.backend));
    found = runtime::PlanCacheLookup(options.plan_cache_dir, key);
  }
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const runtime::ExecutionPlan> plan,
                        runtime::PlanExecution(*model, given, options, device,
                                               found.hit ? &found.choices : nullptr, resources));
  if (cache) {
    std::string status = found.status;
    if (status.rfind("corrupt", 0) == 0)
      std::fprintf(stderr, "kiln: warning: plan cache file %s; timing again\n", status.c_str());
    if (found.hit) {
      status += " (" + std::to_string(plan->cached_choices) + " choices reused)";
    } else {
      Status st = runtime::PlanCacheStore(options.plan_cache_dir, key, plan->choices);
      status += st.ok() ? ", stored " + std::to_string(plan->choices.size()) + " choices"
                        : "; not stored: " + st.message();
    }
    std::lock_guard<std::mutex> lock(mu);
    plan_cache_status = status;
  }
  auto shared = std::make_shared<const runtime::Executor>(model, std::move(plan));
  std::lock_guard<std::mutex> lock(mu);
  // Another thread may have planned the same shapes meanwhile: the first stored wins.
  CachedPlan& entry = plans.emplace(sig, CachedPlan{shared, 0}).first->second;
  entry.last_used = ++uses;
  // Beyond the bound, the least recently used plans go (runs holding one finish with it).
  while (options.max_plans > 0 && plans.size() > options.max_plans) {
    auto oldest = plans.begin();
    for (auto it = plans.begin(); it != plans.end(); ++it)
      if (it->second.last_used < oldest->second.last_used) oldest = it;
    plans.erase(oldest);
    ++evicted;
  }
  return entry.plan;
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

// The model file's bytes, or nullopt when it cannot be read (the loader then reports why).
static std::optional<std::string> ReadModelFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  f.seekg(0, std::ios::end);
  std::string bytes(static_cast<size_t>(std::max<std::streamoff>(f.tellg(), 0)), '\0');
  f.seekg(0);
  f.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) return std::nullopt;
  return bytes;
}

// Exceptions stop at the API: memory exhaustion (std::bad_alloc from any allocation, oneDNN's
// out-of-memory) is OutOfMemory, anything else Internal, each naming what was being done
// (`what()`, called only then: a run's hot path builds no string).
template <typename W, typename F>
auto AtApiBoundary(W&& what, F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kOutOfMemory,
                  "out of host memory while " + std::string(what()) +
                      " (a smaller batch, or fewer concurrent runs, needs less)");
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal,
                  "unexpected exception while " + std::string(what()) + ": " + e.what());
  }
}

StatusOr<std::unique_ptr<Session>> Session::Load(const std::string& path,
                                                 const SessionOptions& options) {
  return AtApiBoundary(
      [&] { return "loading '" + path + "'"; },
      [&]() -> StatusOr<std::unique_ptr<Session>> { return LoadImpl(path, options); });
}

StatusOr<std::unique_ptr<Session>> Session::LoadImpl(const std::string& path,
                                                     const SessionOptions& options) {
  // With a plan cache the file is read once into memory: hashed for the cache key, then parsed.
  // External data files are not hashed: a cache entry holds only kernel choices, which stay
  // correct (if perhaps not fastest) whatever the weights are.
  std::optional<std::string> bytes;
  if (options.tune && !options.plan_cache_dir.empty()) bytes = ReadModelFile(path);
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  // Shared weights: the file is hashed in pieces first (a second read, from the page cache, but
  // no whole-file copy in memory); an unreadable file is left to the loader to report.
  std::string sha256;
  if (options.share_weights) {
    auto digest =
        bytes ? StatusOr<std::string>(runtime::Sha256Hex(*bytes)) : runtime::Sha256HexOfFile(path);
    if (digest.ok()) sha256 = *digest;
  }
  auto impl = LoadImplShared(
      sha256, dir,
      [&] { return bytes ? onnxio::LoadModelFromBytes(*bytes, dir) : onnxio::LoadModel(path); },
      options);
  if (!impl.ok()) return Status(impl.status()).AddContext("while loading '" + path + "'");
  if (bytes) (*impl)->model_hash = runtime::ContentHash(*bytes);
  return std::unique_ptr<Session>(new Session(std::move(impl).value()));
}

StatusOr<std::unique_ptr<Session>> SessionAccess::LoadFromGraph(const ir::Graph& graph,
                                                                const SessionOptions& options) {
  return LoadFromGraph(ir::Graph(graph), options);
}

StatusOr<std::unique_ptr<Session>> SessionAccess::LoadFromGraph(ir::Graph&& graph,
                                                                const SessionOptions& options) {
  return AtApiBoundary(
      [] { return "loading a model from a graph"; },
      [&]() -> StatusOr<std::unique_ptr<Session>> {
        KILN_ASSIGN_OR_RETURN(
            auto impl,
            LoadImplShared(
                "", "", [&] { return std::make_unique<ir::Graph>(std::move(graph)); }, options));
        return std::unique_ptr<Session>(new Session(std::move(impl)));
      });
}

StatusOr<std::unique_ptr<Session>> Session::LoadFromBytes(const std::string& bytes,
                                                          const SessionOptions& options) {
  return AtApiBoundary([] { return "loading a model from memory"; },
                       [&]() -> StatusOr<std::unique_ptr<Session>> {
                         KILN_ASSIGN_OR_RETURN(
                             auto impl,
                             LoadImplShared(
                                 options.share_weights ? runtime::Sha256Hex(bytes) : "", "",
                                 [&] { return onnxio::LoadModelFromBytes(bytes, ""); }, options));
                         if (options.tune && !options.plan_cache_dir.empty())
                           impl->model_hash = runtime::ContentHash(bytes);
                         return std::unique_ptr<Session>(new Session(std::move(impl)));
                       });
}

const std::vector<TensorSpec>& Session::inputs() const { return impl_->inputs; }
const std::vector<TensorSpec>& Session::outputs() const { return impl_->outputs; }
const std::vector<std::string>& Session::optimization_log() const {
  return impl_->optimization_log;
}

Status Session::Run(const std::vector<NamedTensor>& inputs,
                    std::vector<NamedTensor>* outputs) const {
  return Run(inputs, outputs, nullptr);
}

StatusOr<std::shared_ptr<void>> Session::AllocateHostBuffer(size_t bytes) const {
  if (impl_->device) return impl_->device->AllocateHost(bytes);
  return runtime::AlignedHostMemory(bytes);
}

std::string Session::plan_cache_status() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->plan_cache_status;
}

std::string Session::device_description() const {
  return impl_->device ? impl_->device->Describe() : "";
}

SessionStats Session::stats() const {
  SessionStats s;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    s.plans = impl_->plans.size();
    s.plans_evicted = impl_->evicted;
    for (const auto& [sig, cached] : impl_->plans)
      s.planned_arena_bytes_max =
          std::max(s.planned_arena_bytes_max, cached.plan->plan().arena_bytes);
  }
  const runtime::WeightCache& weights = *impl_->resources->weights;
  s.packed_weight_bytes = weights.bytes();
  s.device_constant_bytes = impl_->resources->device_constants.bytes();
  s.packed_weights = weights.entries();
  s.packed_weight_reuses = weights.hits();
  s.constant_bytes = impl_->constant_bytes;
  s.weights_shared = impl_->weights_shared;
  s.arena_bytes = impl_->resources->arenas.bytes();
  s.arenas = impl_->resources->arenas.count();
  return s;
}

DeviceStartup Session::device_startup() const {
  if (!impl_->device) return {};
  DeviceStartup s = impl_->device->Startup();
  const runtime::PluginDependencyReport plugin =
      runtime::LoadedPluginDependencies(impl_->options.backend);
  if (!plugin.plugin.empty()) s.plugin_load_ms = plugin.load_ms;
  return s;
}

Status Session::Run(const std::vector<NamedTensor>& inputs, std::vector<NamedTensor>* outputs,
                    RunTimings* timings) const {
  return Run(inputs, outputs, RunOptions{}, timings);
}

Status Session::Run(const std::vector<NamedTensor>& inputs, std::vector<NamedTensor>* outputs,
                    const RunOptions& options, RunTimings* timings) const {
  return AtApiBoundary([] { return "running the model"; },
                       [&] { return RunImpl(inputs, outputs, false, options, timings); });
}

Status Session::RunInto(const std::vector<NamedTensor>& inputs, std::vector<NamedTensor>* outputs,
                        const RunOptions& options, RunTimings* timings) const {
  if (outputs == nullptr) return InvalidArgument("RunInto needs the outputs to write into");
  return AtApiBoundary([] { return "running the model"; },
                       [&] { return RunImpl(inputs, outputs, true, options, timings); });
}

const ModelMetadata& Session::metadata() const { return impl_->metadata; }

namespace {
// A shape the caller names for Prepare: every dim >= 0, and an element and byte count int64 holds
// (the planner and kernels multiply dims; a product that wraps would plan the wrong sizes).
Status CheckPreparedShape(const TensorSpec& spec, const Shape& shape) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const int64_t elem = std::max<int64_t>(1, static_cast<int64_t>(DataTypeSize(spec.dtype)));
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return InvalidArgument("Prepare: input '" + spec.name + "' shape " + ShapeToString(shape) +
                             " has a negative dimension");
    if (d != 0 && n > kMax / elem / d)
      return InvalidArgument("Prepare: input '" + spec.name + "' shape " + ShapeToString(shape) +
                             " has more bytes than a 64-bit count holds");
    n *= d;
  }
  return OkStatus();
}
}  // namespace

Status Session::Prepare(const std::vector<std::pair<std::string, Shape>>& input_shapes) const {
  return AtApiBoundary(
      [] { return "preparing a plan"; },
      [&]() -> Status {
        for (const auto& [name, s] : input_shapes)
          KILN_RETURN_IF_ERROR(FindSpec(impl_->inputs, name, "input").status());
        std::vector<NamedTensor> inputs;
        for (const TensorSpec& spec : impl_->inputs) {
          const Shape* shape = nullptr;
          for (const auto& [name, s] : input_shapes)
            if (name == spec.name) shape = &s;
          if (shape != nullptr) KILN_RETURN_IF_ERROR(CheckPreparedShape(spec, *shape));
          Shape declared;
          if (shape == nullptr) {
            if (!spec.rank_known)
              return InvalidArgument("Prepare: input '" + spec.name +
                                     "' has no declared shape; name it");
            for (int64_t d : spec.dims) {
              if (d < 0)
                return InvalidArgument("Prepare: input '" + spec.name + "' is " + spec.ToString() +
                                       ", with a symbolic dimension; give its shape");
              declared.push_back(d);
            }
            shape = &declared;
          }
          inputs.push_back({spec.name, Tensor::Empty(spec.dtype, *shape)});
        }
        std::vector<const Tensor*> ordered;
        KILN_RETURN_IF_ERROR(impl_->BindInputs(inputs, &ordered));
        KILN_ASSIGN_OR_RETURN(auto plan, impl_->PlanFor(ordered));
        plan->Warm();
        return OkStatus();
      });
}

namespace {
// Each step's wall time and start, with its node, op, kernel and output types, for
// RunTimings::nodes (CPU plans). The descriptions are the executor's, made once per plan.
void FillNodeTimes(const runtime::Executor& executor, const std::vector<double>& step_ms,
                   const std::vector<double>& step_start_us, std::vector<NodeTime>* nodes) {
  const std::vector<NodeTime>& described = executor.StepDescriptions();
  nodes->resize(described.size());
  for (size_t i = 0; i < described.size(); ++i) {
    NodeTime& nt = (*nodes)[i];
    nt = described[i];  // reuses the strings' storage when `nodes` is reused between runs
    nt.ms = step_ms[i];
    nt.start_us = step_start_us[i];
  }
}
}  // namespace

Status Session::RunImpl(const std::vector<NamedTensor>& inputs, std::vector<NamedTensor>* outputs,
                        bool bound, const RunOptions& options, RunTimings* timings) const {
  const bool controlled = options.deadline.has_value() || options.cancel != nullptr;
  const RunOptions* control = controlled ? &options : nullptr;
  // A deadline already passed, or a cancel already set: nothing is planned or run.
  KILN_RETURN_IF_ERROR(runtime::CheckRunControl(control, 0, 0, [] { return std::string(); }));
  // Per thread, kept between runs: only a thread's first run (of any session) grows them.
  thread_local std::vector<const Tensor*> ordered;
  thread_local std::vector<Tensor*> bound_outputs;
  KILN_RETURN_IF_ERROR(impl_->BindInputs(inputs, &ordered));
  bound_outputs.clear();
  if (bound) KILN_RETURN_IF_ERROR(impl_->BindOutputs(outputs, &bound_outputs));
  KILN_ASSIGN_OR_RETURN(auto executor, impl_->PlanFor(ordered));
  const runtime::ExecutionPlan* plan = &executor->plan();
  for (size_t k = 0; k < bound_outputs.size(); ++k) {  // static shapes: checked before running
    const int slot = plan->output_slots[k];
    if (bound_outputs[k] != nullptr && plan->static_shape[slot] &&
        bound_outputs[k]->shape() != plan->shapes[slot])
      return InvalidArgument("output '" + impl_->outputs[k].name +
                             "': the bound tensor has shape " +
                             ShapeToString(bound_outputs[k]->shape()) + "; this run computes " +
                             ShapeToString(plan->shapes[slot]));
  }
  std::vector<Tensor> outs;
  runtime::DeviceTimings dt;
  // Per thread, kept between traced runs.
  thread_local std::vector<double> step_ms, step_start_us;
  const bool per_node = timings && timings->per_node && !impl_->device;
  if (per_node) {
    dt.step_ms = &step_ms;
    dt.step_start_us = &step_start_us;
    timings->start_us = std::chrono::duration<double, std::micro>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    timings->thread = static_cast<int>(gettid());
  }
  if (bound) {
    // An all-null binding still runs the model (every output dropped), not the unbound path.
    if (bound_outputs.empty()) bound_outputs.assign(1, nullptr);
    KILN_RETURN_IF_ERROR(executor->Run(ordered, nullptr, &dt, control, bound_outputs));
  } else {
    KILN_RETURN_IF_ERROR(executor->Run(ordered, &outs, &dt, control));
  }
  if (timings) {
    timings->device = impl_->device != nullptr;
    timings->upload_ms = dt.upload_ms;
    timings->compute_ms = dt.compute_ms;
    timings->download_ms = dt.download_ms;
    if (per_node)
      FillNodeTimes(*executor, step_ms, step_start_us, &timings->nodes);
    else
      timings->nodes.clear();
  }
  if (bound) return OkStatus();
  outputs->clear();
  for (size_t i = 0; i < outs.size(); ++i)
    outputs->push_back(NamedTensor{impl_->outputs[i].name, std::move(outs[i])});
  return OkStatus();
}

StatusOr<std::string> Session::DescribePlan(const std::vector<NamedTensor>& inputs) const {
  return AtApiBoundary([] { return "planning the model"; },
                       [&]() -> StatusOr<std::string> {
                         std::vector<const Tensor*> ordered;
                         KILN_RETURN_IF_ERROR(impl_->BindInputs(inputs, &ordered));
                         KILN_ASSIGN_OR_RETURN(auto plan, impl_->PlanFor(ordered));
                         return plan->plan().Describe(*impl_->model);
                       });
}

StatusOr<PlanSummary> Session::DescribePlanSummary(const std::vector<NamedTensor>& inputs) const {
  return AtApiBoundary([] { return "planning the model"; },
                       [&]() -> StatusOr<PlanSummary> {
                         std::vector<const Tensor*> ordered;
                         KILN_RETURN_IF_ERROR(impl_->BindInputs(inputs, &ordered));
                         KILN_ASSIGN_OR_RETURN(auto plan, impl_->PlanFor(ordered));
                         return plan->plan().Summarize(*impl_->model);
                       });
}

std::vector<std::pair<std::string, int>> Session::optimized_op_counts() const {
  return OpCounts(*impl_->model->graph);
}

StatusOr<ModelReport> InspectModel(const std::string& path) {
  return AtApiBoundary([&] { return "inspecting " + path; },
                       [&]() -> StatusOr<ModelReport> {
                         KILN_ASSIGN_OR_RETURN(auto graph, onnxio::LoadModel(path));
                         const ir::Graph& g = *graph;
                         ModelReport r;
                         r.metadata = MetadataOf(g);
                         for (int id : g.inputs) r.inputs.push_back(SpecOf(g.values[id]));
                         for (int id : g.outputs) r.outputs.push_back(SpecOf(g.values[id]));
                         std::map<std::string, int> ops;
                         std::function<void(const ir::Graph&)> count = [&](const ir::Graph& sg) {
                           for (const auto& v : sg.values)
                             if (v.constant) {
                               r.parameters += v.constant->numel();
                               r.parameter_bytes += static_cast<int64_t>(v.constant->bytes());
                             }
                           for (const auto& n : sg.nodes) {
                             if (const Tensor* t = n.GetTensor("value")) {
                               r.parameters += t->numel();
                               r.parameter_bytes += static_cast<int64_t>(t->bytes());
                             }
                             ++ops[(n.domain.empty() ? "" : n.domain + ".") + n.op_type];
                             ++r.nodes;
                             for (const auto& [name, a] : n.attrs)
                               if (a.g) count(*a.g);  // control-flow bodies
                           }
                         };
                         count(g);
                         r.op_counts.assign(ops.begin(), ops.end());
                         KILN_ASSIGN_OR_RETURN(auto model, runtime::BuildModel(std::move(graph)));
                         if (!model->unsupported.empty())
                           r.unsupported =
                               runtime::UnsupportedNodesError(model->unsupported).message();
                         return r;
                       });
}

}  // namespace kiln
