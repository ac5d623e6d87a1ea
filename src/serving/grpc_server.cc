// GrpcFrontend (grpc_server.h). Every method answers through a ServerUnaryReactor; ModelInfer
// finishes its reactor from the batcher's callback, and the repository methods from the core's
// control thread, so no gRPC thread waits on a batch or a load.
#include "serving/grpc_server.h"

#include <google/protobuf/util/json_util.h>
#include <grpc/grpc.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "serving/kserve_v2.grpc.pb.h"

namespace kiln::serving {

namespace {

using Clock = std::chrono::steady_clock;
namespace pb = ::inference;

grpc::Status ToGrpc(const Status& s) {
  grpc::StatusCode code = grpc::StatusCode::INTERNAL;
  switch (s.code()) {
    case StatusCode::kOk:
      return grpc::Status::OK;
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnsupported:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case StatusCode::kNotFound:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case StatusCode::kUnavailable:
    case StatusCode::kCancelled:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    case StatusCode::kDeadlineExceeded:
      code = grpc::StatusCode::DEADLINE_EXCEEDED;
      break;
    default:
      break;
  }
  return grpc::Status(code, s.message());
}

template <typename T, typename Field>
void CopyContents(const Field& values, Tensor* t) {
  T* d = static_cast<T*>(t->raw());
  for (int i = 0; i < values.size(); ++i) d[i] = static_cast<T>(values.Get(i));
}

// The typed contents of one input into `t` (whose dtype and shape are set).
Status FromContents(const pb::InferTensorContents& c, const std::string& name, Tensor* t) {
  int64_t count = -1;
  switch (t->dtype()) {
    case DataType::kBool:
      count = c.bool_contents_size();
      if (count == t->numel()) CopyContents<bool>(c.bool_contents(), t);
      break;
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
      count = c.int_contents_size();
      if (count != t->numel()) break;
      if (t->dtype() == DataType::kInt8) CopyContents<int8_t>(c.int_contents(), t);
      if (t->dtype() == DataType::kInt16) CopyContents<int16_t>(c.int_contents(), t);
      if (t->dtype() == DataType::kInt32) CopyContents<int32_t>(c.int_contents(), t);
      break;
    case DataType::kInt64:
      count = c.int64_contents_size();
      if (count == t->numel()) CopyContents<int64_t>(c.int64_contents(), t);
      break;
    case DataType::kUInt8:
    case DataType::kUInt16:
    case DataType::kUInt32:
      count = c.uint_contents_size();
      if (count != t->numel()) break;
      if (t->dtype() == DataType::kUInt8) CopyContents<uint8_t>(c.uint_contents(), t);
      if (t->dtype() == DataType::kUInt16) CopyContents<uint16_t>(c.uint_contents(), t);
      if (t->dtype() == DataType::kUInt32) CopyContents<uint32_t>(c.uint_contents(), t);
      break;
    case DataType::kUInt64:
      count = c.uint64_contents_size();
      if (count == t->numel()) CopyContents<uint64_t>(c.uint64_contents(), t);
      break;
    case DataType::kFloat:
      count = c.fp32_contents_size();
      if (count == t->numel()) CopyContents<float>(c.fp32_contents(), t);
      break;
    case DataType::kDouble:
      count = c.fp64_contents_size();
      if (count == t->numel()) CopyContents<double>(c.fp64_contents(), t);
      break;
    default:
      return InvalidArgument("input '" + name + "': " + KServeDatatype(t->dtype()) +
                             " must be sent in raw_input_contents");
  }
  if (count != t->numel())
    return InvalidArgument("input '" + name + "': shape " + ShapeToString(t->shape()) + " holds " +
                           std::to_string(t->numel()) + " elements; contents has " +
                           std::to_string(count));
  return OkStatus();
}

// The most elements any typed field of the contents holds (an upper bound on what was sent).
int64_t ContentsCount(const pb::InferTensorContents& c) {
  return std::max({c.bool_contents_size(), c.int_contents_size(), c.int64_contents_size(),
                   c.uint_contents_size(), c.uint64_contents_size(), c.fp32_contents_size(),
                   c.fp64_contents_size(), c.bytes_contents_size()});
}

int64_t IntParam(const google::protobuf::Map<std::string, pb::InferParameter>& params,
                 const char* key) {
  auto it = params.find(key);
  if (it == params.end()) return 0;
  if (it->second.has_int64_param()) return it->second.int64_param();
  if (it->second.has_uint64_param()) return static_cast<int64_t>(it->second.uint64_param());
  return 0;
}

StatusOr<InferRequest> FromGrpcRequest(const pb::ModelInferRequest& req) {
  InferRequest r;
  r.id = req.id();
  r.timeout_us = IntParam(req.parameters(), "timeout");
  r.priority = static_cast<int>(IntParam(req.parameters(), "priority"));
  const bool raw = req.raw_input_contents_size() > 0;
  if (raw && req.raw_input_contents_size() != req.inputs_size())
    return InvalidArgument("the request has " + std::to_string(req.inputs_size()) + " inputs but " +
                           std::to_string(req.raw_input_contents_size()) + " raw_input_contents");
  for (int i = 0; i < req.inputs_size(); ++i) {
    const pb::ModelInferRequest::InferInputTensor& in = req.inputs(i);
    const DataType type = FromKServeDatatype(in.datatype());
    if (type == DataType::kUndefined)
      return InvalidArgument("input '" + in.name() + "': datatype " + in.datatype() +
                             " is not supported");
    Shape shape;
    int64_t numel = 1;
    for (int64_t d : in.shape()) {
      if (d < 0)
        return InvalidArgument("input '" + in.name() + "': shape dims must be non-negative");
      if (d != 0 && numel > (int64_t{1} << 40) / d)
        return InvalidArgument("input '" + in.name() + "': the shape is too large");
      numel *= d;
      shape.push_back(d);
    }
    // The sizes are checked against what was sent before anything is allocated: a declared
    // shape is only a claim.
    const size_t bytes_wanted = static_cast<size_t>(numel) * DataTypeSize(type);
    if (raw) {
      const std::string& bytes = req.raw_input_contents(i);
      if (bytes.size() != bytes_wanted)
        return InvalidArgument("input '" + in.name() + "': " + in.datatype() +
                               ShapeToString(shape) + " is " + std::to_string(bytes_wanted) +
                               " bytes; raw_input_contents has " + std::to_string(bytes.size()));
    } else if (numel > ContentsCount(in.contents())) {
      return InvalidArgument("input '" + in.name() + "': shape " + ShapeToString(shape) +
                             " holds " + std::to_string(numel) + " elements; contents has " +
                             std::to_string(ContentsCount(in.contents())));
    }
    // Copied, not viewed where gRPC parsed it: reading the request's own string from the
    // batcher's thread was slower on the 2-core EPYC (gRPC p50 +0.2-0.45 ms on a 602 KB input).
    Tensor t = Tensor::Empty(type, shape);
    if (raw) {
      if (bytes_wanted > 0) std::memcpy(t.raw(), req.raw_input_contents(i).data(), bytes_wanted);
    } else {
      KILN_RETURN_IF_ERROR(FromContents(in.contents(), in.name(), &t));
    }
    r.inputs.push_back({in.name(), std::move(t)});
  }
  for (const auto& o : req.outputs()) r.outputs.push_back({o.name(), true});
  return r;
}

// A JSON document of kserve.cc into the message it describes; fields the message leaves out are
// skipped.
grpc::Status FromJson(const std::string& json, google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  const auto status = google::protobuf::util::JsonStringToMessage(json, message, options);
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::INTERNAL,
                      "cannot encode the answer: " + std::string(status.message()));
}

// A model control result as the answer to RepositoryModelLoad/Unload: NOT_FOUND for a model the
// repository lacks (load) or that is not loaded (unload), UNAVAILABLE while draining, else the
// code of the failure; the message names the model.
grpc::Status ControlAnswer(const Status& s, const std::string& name, bool load) {
  if (s.ok() || s.code() == StatusCode::kCancelled) return ToGrpc(s);
  return grpc::Status(ToGrpc(s).error_code(), std::string("failed to ") +
                                                  (load ? "load" : "unload") + " model '" + name +
                                                  "': " + s.message());
}

grpc::Status RepositoryNameRefused(const std::string& repository) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      "repository_name '" + repository +
                          "' is not supported: kiln serve has one repository, the paths it was "
                          "given");
}

class Service final : public pb::GRPCInferenceService::CallbackService {
 public:
  explicit Service(ModelServer* core) : core_(core) {}

  // An answer held back at the end of a drain (GrpcFrontend::Drain).
  struct Held {
    grpc::ServerUnaryReactor* reactor;
    grpc::Status status;
  };
  // From now on, answers are held (Release sends them).
  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    holding_.store(true);
  }
  // Returns once no answer has been sent or held for `quiet` (at once when none was lately), or
  // at `until`.
  void WaitQuiet(Clock::duration quiet, Clock::time_point until) {
    for (;;) {
      const Clock::time_point at =
          std::min(Clock::time_point(Clock::duration(last_answer_.load())) + quiet, until);
      if (Clock::now() >= at) return;
      std::this_thread::sleep_until(at);
    }
  }
  // Stops holding; returns what was held, for the caller to finish.
  std::vector<Held> Release() {
    std::lock_guard<std::mutex> lock(mu_);
    holding_.store(false);
    return std::move(held_);
  }
  // Returns once no model control call is waiting for its load or unload, or at `until`.
  void WaitControl(Clock::time_point until) const {
    while (control_calls_.load() > 0 && Clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* ctx,
                                       const pb::ServerLiveRequest*,
                                       pb::ServerLiveResponse* res) override {
    res->set_live(true);
    return Done(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* ctx,
                                        const pb::ServerReadyRequest*,
                                        pb::ServerReadyResponse* res) override {
    res->set_ready(core_->ready());
    return Done(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* ctx,
                                       const pb::ModelReadyRequest* req,
                                       pb::ModelReadyResponse* res) override {
    // An unknown (or unloaded) model is not ready, as Triton answers: tritonclient's
    // is_model_ready then says False instead of raising.
    res->set_ready(core_->ready() && core_->Find(req->name(), req->version()) != nullptr);
    return Done(ctx, grpc::Status::OK);
  }
  // Metadata, config and statistics: the same documents the HTTP endpoints answer
  // (kserve.cc), read into the protocol's messages (Triton's JSON is the proto's JSON mapping).
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* ctx,
                                           const pb::ServerMetadataRequest*,
                                           pb::ServerMetadataResponse* res) override {
    return Done(ctx, FromJson(ServerMetadataJson(), res));
  }
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* ctx,
                                          const pb::ModelMetadataRequest* req,
                                          pb::ModelMetadataResponse* res) override {
    const ModelRef m = core_->Find(req->name(), req->version());
    if (!m) return Done(ctx, NotFoundStatus(req->name(), req->version()));
    return Done(ctx, FromJson(ModelMetadataJson(m->desc), res));
  }
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* ctx,
                                        const pb::ModelConfigRequest* req,
                                        pb::ModelConfigResponse* res) override {
    const ModelRef m = core_->Find(req->name(), req->version());
    if (!m) return Done(ctx, NotFoundStatus(req->name(), req->version()));
    return Done(ctx, FromJson(ModelConfigJson(m->desc), res->mutable_config()));
  }
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* ctx,
                                            const pb::ModelStatisticsRequest* req,
                                            pb::ModelStatisticsResponse* res) override {
    ModelRef only;
    if (!req->name().empty()) {
      only = core_->Find(req->name(), req->version());
      if (!only) return Done(ctx, NotFoundStatus(req->name(), req->version()));
    }
    return Done(ctx, FromJson(core_->StatsJson(only.get()), res));
  }

  // Triton's repository extension: the same index and model control as the HTTP routes.
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* ctx,
                                            const pb::RepositoryIndexRequest* req,
                                            pb::RepositoryIndexResponse* res) override {
    if (!req->repository_name().empty())
      return Done(ctx, RepositoryNameRefused(req->repository_name()));
    for (const RepositoryEntry& e : core_->RepositoryIndex(req->ready())) {
      pb::RepositoryIndexResponse::ModelIndex* m = res->add_models();
      m->set_name(e.name);
      m->set_version(e.version);
      m->set_state(e.state);
      m->set_reason(e.reason);
    }
    return Done(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* RepositoryModelLoad(grpc::CallbackServerContext* ctx,
                                                const pb::RepositoryModelLoadRequest* req,
                                                pb::RepositoryModelLoadResponse*) override {
    return Control(ctx, req->repository_name(), req->model_name(), &req->parameters(), true);
  }
  grpc::ServerUnaryReactor* RepositoryModelUnload(grpc::CallbackServerContext* ctx,
                                                  const pb::RepositoryModelUnloadRequest* req,
                                                  pb::RepositoryModelUnloadResponse*) override {
    // Unload parameters (tritonclient sends unload_dependents) mean nothing without ensembles.
    return Control(ctx, req->repository_name(), req->model_name(), nullptr, false);
  }

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx,
                                       const pb::ModelInferRequest* req,
                                       pb::ModelInferResponse* res) override {
    const auto received = Clock::now();
    auto seconds = [received] {
      return std::chrono::duration<double>(Clock::now() - received).count();
    };
    const ModelRef model = core_->Find(req->model_name(), req->model_version());
    if (!model) {
      const Status s = NotFound("unknown model '" + req->model_name() + "'");
      core_->Record(nullptr, "grpc", s, seconds());
      return Done(ctx, ToGrpc(s));
    }
    auto token = core_->Admit();
    if (!token) {
      const Status s(StatusCode::kCancelled, "the server is shutting down");
      core_->Record(model.get(), "grpc", s, seconds());
      return Done(ctx, ToGrpc(s));
    }
    auto parsed = FromGrpcRequest(*req);
    if (!parsed.ok()) {
      core_->Record(model.get(), "grpc", parsed.status(), seconds());
      return Done(ctx, ToGrpc(parsed.status()));
    }
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    auto params = std::make_shared<InferRequest>(std::move(*parsed));
    std::vector<NamedTensor> inputs = std::move(params->inputs);
    ModelServer* core = core_;
    core_->Infer(*model, std::move(inputs), params->timeout_us, params->priority,
                 [this, core, model, params, token, reactor, res, seconds](
                     Status s, std::vector<NamedTensor> outputs) mutable {
                   if (s.ok()) s = FillResponse(*model, *params, std::move(outputs), res);
                   core->Record(model.get(), "grpc", s, seconds());
                   Answer(reactor, ToGrpc(s));
                   token.reset();
                 });
    return reactor;
  }

 private:
  // Model control on the core's control thread; refusals that need no load are answered here.
  grpc::ServerUnaryReactor* Control(
      grpc::CallbackServerContext* ctx, const std::string& repository, const std::string& name,
      const google::protobuf::Map<std::string, pb::ModelRepositoryParameter>* params, bool load) {
    if (!core_->model_control())
      return Done(ctx, grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, kModelControlOff));
    if (!repository.empty()) return Done(ctx, RepositoryNameRefused(repository));
    if (name.empty())
      return Done(ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "model_name is empty"));
    if (params)
      for (const auto& [key, value] : *params) {
        const Status refused = CheckLoadParameter(key);
        if (!refused.ok())
          return Done(ctx, grpc::Status(grpc::StatusCode::UNIMPLEMENTED, refused.message()));
      }
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    control_calls_.fetch_add(1);
    core_->Control(name, load, [this, reactor, name, load](Status s) {
      Answer(reactor, ControlAnswer(s, name, load));
      control_calls_.fetch_sub(1);
    });
    return reactor;
  }

  // Finishes `reactor` now, or holds its answer while Hold() is in force.
  void Answer(grpc::ServerUnaryReactor* reactor, grpc::Status s) {
    last_answer_.store(Clock::now().time_since_epoch().count());
    if (holding_.load()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (holding_.load()) {
        held_.push_back({reactor, std::move(s)});
        return;
      }
    }
    reactor->Finish(std::move(s));
  }
  grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, grpc::Status s) {
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    Answer(r, std::move(s));
    return r;
  }
  static grpc::Status NotFoundStatus(const std::string& name, const std::string& version) {
    return grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        "unknown model '" + name + "'" + (version.empty() ? "" : " version " + version));
  }
  static Status FillResponse(const Model& model, const InferRequest& params,
                             std::vector<NamedTensor> outputs, pb::ModelInferResponse* res) {
    res->set_model_name(model.desc.name);
    res->set_model_version(model.desc.version);
    res->set_id(params.id);
    KILN_ASSIGN_OR_RETURN(std::vector<SelectedOutput> selected,
                          SelectOutputs(model.desc.name, params, outputs));
    for (const SelectedOutput& sel : selected) {  // always raw, whatever `binary` says
      const Tensor& t = *sel.tensor;
      pb::ModelInferResponse::InferOutputTensor* o = res->add_outputs();
      o->set_name(sel.request.name);
      o->set_datatype(KServeDatatype(t.dtype()));
      for (int64_t d : t.shape()) o->add_shape(d);
      res->add_raw_output_contents(static_cast<const char*>(t.raw()), t.bytes());
    }
    return OkStatus();
  }

  ModelServer* core_;
  std::atomic<int> control_calls_{0};       // RepositoryModelLoad/Unload calls not yet answered
  std::atomic<Clock::rep> last_answer_{0};  // when the last answer was sent or held
  std::atomic<bool> holding_{false};
  std::mutex mu_;
  std::vector<Held> held_;  // under mu_
};

}  // namespace

struct GrpcFrontend::Impl {
  std::unique_ptr<Service> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::mutex stop_mu;
  bool stopped = false;  // under stop_mu
};

GrpcFrontend::GrpcFrontend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StatusOr<std::unique_ptr<GrpcFrontend>> GrpcFrontend::Start(ModelServer* core,
                                                            const std::string& host, int port,
                                                            size_t max_message_bytes) {
  auto impl = std::make_unique<Impl>();
  impl->service = std::make_unique<Service>(core);
  grpc::ServerBuilder builder;
  const std::string address =
      (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &impl->port);
  const int limit = static_cast<int>(std::min<size_t>(max_message_bytes, INT32_MAX));
  builder.SetMaxReceiveMessageSize(limit);
  builder.SetMaxSendMessageSize(limit);
  builder.RegisterService(impl->service.get());
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->port == 0) return Unavailable("cannot listen for gRPC on " + address);
  return std::unique_ptr<GrpcFrontend>(new GrpcFrontend(std::move(impl)));
}

GrpcFrontend::~GrpcFrontend() { Shutdown(); }

int GrpcFrontend::port() const { return impl_->port; }

void GrpcFrontend::Drain(std::chrono::steady_clock::time_point until) {
  std::lock_guard<std::mutex> lock(impl_->stop_mu);
  if (impl_->stopped) return;
  impl_->stopped = true;
  Service& service = *impl_->service;
  service.Hold();
  service.WaitQuiet(std::chrono::milliseconds(kQuietMs),
                    std::min(until, Clock::now() + std::chrono::milliseconds(kHoldMaxMs)));
  // gRPC's shutdown begins here, through its C API, so that the GOAWAYs are known to be queued on
  // every connection (ahead of anything written after) and the port closed before the held
  // answers go. A model load still running is waited for (until `until`); then
  // grpc::Server::Shutdown joins the shutdown (every caller of it is notified when it completes)
  // and gives the answers a second to leave and the connections to close: a client that does
  // not read an idle connection never acknowledges the GOAWAY's ping, and gRPC would otherwise
  // keep that connection 20 s. At the second, what is left is cancelled and closed.
  grpc_completion_queue* cq = grpc_completion_queue_create_for_next(nullptr);
  grpc_server_shutdown_and_notify(impl_->server->c_server(), cq, impl_.get());
  for (Service::Held& h : service.Release()) h.reactor->Finish(std::move(h.status));
  service.WaitControl(until);
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  impl_->server->Wait();
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), nullptr).type !=
         GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(cq);
}

void GrpcFrontend::Shutdown() {
  std::lock_guard<std::mutex> lock(impl_->stop_mu);
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  impl_->server->Wait();
}

}  // namespace kiln::serving
