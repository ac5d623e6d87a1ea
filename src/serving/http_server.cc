// Server (kiln/server.h): KServe v2 over HTTP/1.1 with Boost.Beast on Asio. Each connection is
// a chain of asynchronous operations on its own strand: read the header (header limit, then the
// body limit decided from Content-Length before a byte of body is read), read the body, route,
// and for an inference hand the tensors to the model's batcher. The connection then holds no
// thread: the batcher's callback posts the outputs back to the connection's strand, which builds
// the response (JSON or binary) there, so the batcher's thread does no serialization.
// clang-format off
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange
// clang-format on
#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "kiln/server.h"
#include "serving/grpc_server.h"
#include "serving/kserve.h"
#include "serving/model_server.h"

namespace kiln {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using serving::InferRequest;
using serving::Model;

// Declared so that destruction runs: threads, acceptor, io_context (its unrun handlers, holding
// connections, go with it), then the counters those connections touch.
namespace serving {
struct HttpState {
  ServerOptions options;
  std::atomic<int> connections{0};
  int port = 0;
  std::mutex drain_mu;
  std::optional<DrainReport> drained;
  std::unique_ptr<serving::ModelServer> core;
  std::unique_ptr<serving::GrpcFrontend> grpc;
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  std::thread warm;

  void Accept();
};
}  // namespace serving

struct Server::Impl : serving::HttpState {};

namespace {

using Clock = std::chrono::steady_clock;
using Response = http::response<http::string_body>;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

http::status HttpStatusOf(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return http::status::ok;
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnsupported:
      return http::status::bad_request;
    case StatusCode::kNotFound:
      return http::status::not_found;
    case StatusCode::kUnavailable:
    case StatusCode::kCancelled:
      return http::status::service_unavailable;
    case StatusCode::kDeadlineExceeded:
      return http::status::gateway_timeout;
    default:
      return http::status::internal_server_error;
  }
}

std::vector<std::string_view> Segments(std::string_view target) {
  const size_t q = target.find('?');
  if (q != std::string_view::npos) target = target.substr(0, q);
  std::vector<std::string_view> out;
  while (!target.empty()) {
    const size_t s = target.find('/');
    if (s != 0) out.push_back(target.substr(0, s));
    if (s == std::string_view::npos) break;
    target.remove_prefix(s + 1);
  }
  return out;
}

constexpr size_t kReadBytes = 64 * 1024;

// A header value that is all decimal digits (Inference-Header-Content-Length), else nothing.
std::optional<size_t> Decimal(beast::string_view v) {
  const std::string s(v);
  char* end = nullptr;
  const unsigned long long n = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0') return std::nullopt;
  return static_cast<size_t>(n);
}

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, serving::HttpState* server)
      : stream_(std::move(socket)), server_(server) {}
  ~Connection() { server_->connections.fetch_sub(1); }

  void Start(bool over_limit) {
    if (over_limit) {
      keep_alive_ = false;
      Reply(http::status::service_unavailable,
            serving::ErrorJson("too many connections (the limit is " +
                               std::to_string(server_->options.max_connections) + ")"),
            "1");
      return;
    }
    ReadHeader();
  }

 private:
  void ReadHeader() {
    // Beast reads at most the buffer's free capacity (512 bytes when empty, up to 64 KiB): a
    // 64 KiB buffer reads a 600 KB tensor in 10 reads instead of 1200.
    if (buffer_.capacity() < kReadBytes) buffer_.reserve(kReadBytes);
    direct_.reset();
    direct_body_ = {};
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_->options.max_header_bytes));
    parser_->body_limit(server_->options.max_body_bytes);
    stream_.expires_after(std::chrono::milliseconds(server_->options.idle_timeout_ms));
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    received_ = Clock::now();
    if (ec == http::error::header_limit) {
      keep_alive_ = false;
      return Reply(
          http::status::request_header_fields_too_large,
          serving::ErrorJson("the request header exceeds " +
                             std::to_string(server_->options.max_header_bytes) + " bytes"));
    }
    // Beast checks Content-Length against the body limit as the header completes.
    const auto length = parser_->content_length();
    if (ec == http::error::body_limit ||
        (!ec && length && *length > server_->options.max_body_bytes)) {
      keep_alive_ = false;
      return Reply(http::status::payload_too_large,
                   serving::ErrorJson("the request body is " +
                                      (length ? std::to_string(*length) : std::string("over")) +
                                      " bytes; the limit is " +
                                      std::to_string(server_->options.max_body_bytes)));
    }
    if (ec) return Close();  // closed, timed out or not HTTP: nothing to answer
    if (length && *length > 0 && !parser_->chunked() && ReadDirect(*length)) return;
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnBody(ec); });
  }

  void OnBody(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      keep_alive_ = false;
      return Reply(http::status::payload_too_large,
                   serving::ErrorJson("the request body exceeds " +
                                      std::to_string(server_->options.max_body_bytes) + " bytes"));
    }
    if (ec) return Close();
    request_ = parser_->release();
    BodyRead();
  }

  void BodyRead() {
    stream_.expires_never();
    keep_alive_ = request_.keep_alive();
    Route();
  }

  // A binary infer body (Inference-Header-Content-Length with a Content-Length) is read straight
  // from the socket into one 64-byte-aligned buffer, placed so that its binary part starts on a
  // 64-byte boundary: the input tensors are then used where they lie, with no pass through the
  // parser's buffer into a string and no copy into each tensor. Any other body, and a header
  // Infer() will refuse, goes through Beast's parser.
  bool ReadDirect(size_t length) {
    const auto& header = parser_->get();
    const auto h = header.find("Inference-Header-Content-Length");
    if (header.method() != http::verb::post || h == header.end()) return false;
    const std::optional<size_t> json_length = Decimal(h->value());
    if (!json_length || *json_length > length) return false;
    const size_t pad = (64 - *json_length % 64) % 64;
    void* p = std::aligned_alloc(64, (pad + length + 63) / 64 * 64);
    if (!p) return false;
    direct_ = std::shared_ptr<char>(static_cast<char*>(p), [](char* q) { std::free(q); });
    char* body = direct_.get() + pad;
    direct_body_ = std::string_view(body, length);
    const size_t have = std::min(buffer_.size(), length);  // what came with the header
    net::buffer_copy(net::buffer(body, have), buffer_.data());
    buffer_.consume(have);
    request_ = parser_->release();
    net::async_read(stream_, net::buffer(body + have, length - have),
                    [self = shared_from_this()](beast::error_code ec, size_t) {
                      if (ec) return self->Close();
                      self->BodyRead();
                    });
    return true;
  }

  void Route() {
    const auto target = request_.target();
    const auto seg = Segments(std::string_view(target.data(), target.size()));
    const http::verb verb = request_.method();
    serving::ModelServer& core = *server_->core;
    auto get_only = [&](auto&& answer) {
      if (verb != http::verb::get && verb != http::verb::head)
        return Reply(http::status::method_not_allowed, serving::ErrorJson("use GET"));
      answer();
    };
    if (seg.size() == 1 && seg[0] == "metrics")
      return get_only(
          [&] { Reply(http::status::ok, core.MetricsText(), "", "text/plain; version=0.0.4"); });
    if (seg.empty() || seg[0] != "v2")
      return Reply(http::status::not_found, serving::ErrorJson("no such endpoint"));
    if (seg.size() == 1)
      return get_only([&] { Reply(http::status::ok, serving::ServerMetadataJson()); });
    if (seg.size() == 3 && seg[1] == "health") {
      if (seg[2] == "live") return get_only([&] { Reply(http::status::ok, ""); });
      if (seg[2] == "ready")
        return get_only([&] {
          Reply(core.ready() ? http::status::ok : http::status::service_unavailable, "");
        });
    }
    if (seg.size() == 3 && seg[1] == "models" && seg[2] == "stats")
      return get_only([&] { Reply(http::status::ok, core.StatsJson(nullptr)); });
    if (seg.size() == 3 && seg[1] == "repository" && seg[2] == "index") {
      // Triton's POST, whose body may say {"ready": true} (only the ready models), and GET.
      bool ready_only = false;
      if (!request_.body().empty()) {
        const nlohmann::json j = nlohmann::json::parse(request_.body(), nullptr, false);
        if (j.is_discarded() || !j.is_object())
          return Reply(http::status::bad_request,
                       serving::ErrorJson("the request body must be a JSON object"));
        auto r = j.find("ready");
        if (r != j.end() && !r->is_boolean())
          return Reply(http::status::bad_request, serving::ErrorJson("'ready' must be a boolean"));
        ready_only = r != j.end() && r->get<bool>();
      }
      nlohmann::json list = nlohmann::json::array();
      for (const serving::RepositoryEntry& e : core.RepositoryIndex(ready_only)) {
        nlohmann::json m = {{"name", e.name}};
        if (!e.version.empty()) m["version"] = e.version;
        m["state"] = e.state;
        if (!e.reason.empty()) m["reason"] = e.reason;
        list.push_back(std::move(m));
      }
      return Reply(http::status::ok, list.dump());
    }
    if (seg.size() == 5 && seg[1] == "repository" && seg[2] == "models" &&
        (seg[4] == "load" || seg[4] == "unload")) {
      if (verb != http::verb::post)
        return Reply(http::status::method_not_allowed, serving::ErrorJson("use POST"));
      return Control(std::string(seg[3]), seg[4] == "load");
    }
    if (seg.size() < 3 || seg[1] != "models")
      return Reply(http::status::not_found, serving::ErrorJson("no such endpoint"));
    std::string version;
    size_t rest = 3;
    if (seg.size() >= 5 && seg[3] == "versions") {
      version = std::string(seg[4]);
      rest = 5;
    }
    const serving::ModelRef model = core.Find(std::string(seg[2]), version);
    if (!model) {
      const Status s = NotFound("unknown model '" + std::string(seg[2]) + "'" +
                                (version.empty() ? "" : " version " + version));
      if (seg.size() > rest && seg[rest] == "infer") core.Record(nullptr, "http", s, 0);
      return Reply(http::status::not_found, serving::ErrorJson(s.message()));
    }
    if (seg.size() == rest)
      return get_only([&] { Reply(http::status::ok, serving::ModelMetadataJson(model->desc)); });
    if (seg.size() == rest + 1) {
      const std::string_view what = seg[rest];
      if (what == "ready")
        return get_only([&] {
          Reply(core.ready() ? http::status::ok : http::status::service_unavailable, "");
        });
      if (what == "config")
        return get_only([&] { Reply(http::status::ok, serving::ModelConfigJson(model->desc)); });
      if (what == "stats")
        return get_only([&] { Reply(http::status::ok, core.StatsJson(model.get())); });
      if (what == "infer") {
        if (verb != http::verb::post)
          return Reply(http::status::method_not_allowed, serving::ErrorJson("use POST"));
        return Infer(model);
      }
    }
    Reply(http::status::not_found, serving::ErrorJson("no such endpoint"));
  }

  // Model control (ModelServer::Control: Load/Unload on the core's control thread): a load takes
  // as long as loading and warming the model, which no Asio thread should wait for.
  void Control(const std::string& name, bool load) {
    if (!server_->core->model_control())
      return Reply(http::status::bad_request, serving::ErrorJson(serving::kModelControlOff));
    // Triton's load request may carry a config or files to load from: not taken here.
    const Status refused = serving::CheckLoadRequestBody(request_.body());
    if (!refused.ok())
      return Reply(http::status::bad_request, serving::ErrorJson(refused.message()));
    server_->core->Control(name, load, [self = shared_from_this()](Status s) {
      net::post(self->stream_.get_executor(), [self, s] {
        if (s.ok()) return self->Reply(http::status::ok, "");
        self->Reply(s.code() == StatusCode::kNotFound ? http::status::bad_request : HttpStatusOf(s),
                    serving::ErrorJson(s.message()));
      });
    });
  }

  void Infer(const serving::ModelRef& model_ref) {
    const Model& model = *model_ref;
    serving::ModelServer& core = *server_->core;
    auto token = core.Admit();
    if (!token) {
      const Status s(StatusCode::kCancelled, "the server is shutting down");
      core.Record(&model, "http", s, SecondsSince(received_));
      return Reply(http::status::service_unavailable, serving::ErrorJson(s.message()), "1");
    }
    if (request_.find(http::field::content_encoding) != request_.end() &&
        request_[http::field::content_encoding] != "identity") {
      const Status s = InvalidArgument("compressed request bodies are not supported");
      core.Record(&model, "http", s, SecondsSince(received_));
      return Reply(http::status::unsupported_media_type, serving::ErrorJson(s.message()));
    }
    std::optional<size_t> json_length;
    auto h = request_.find("Inference-Header-Content-Length");
    if (h != request_.end()) {
      json_length = Decimal(h->value());
      if (!json_length) {
        const Status s = InvalidArgument("Inference-Header-Content-Length is not a number: " +
                                         std::string(h->value()));
        core.Record(&model, "http", s, SecondsSince(received_));
        return Reply(http::status::bad_request, serving::ErrorJson(s.message()));
      }
    }
    auto parsed = direct_ ? serving::ParseHttpInferRequest(direct_body_, json_length, direct_)
                          : serving::ParseHttpInferRequest(request_.body(), json_length);
    direct_.reset();  // the tensors that lie in it hold it
    direct_body_ = {};
    request_.body().clear();
    request_.body().shrink_to_fit();
    if (!parsed.ok()) {
      core.Record(&model, "http", parsed.status(), SecondsSince(received_));
      return Reply(http::status::bad_request, serving::ErrorJson(parsed.status().message()));
    }
    auto params = std::make_shared<InferRequest>(std::move(*parsed));
    std::vector<NamedTensor> inputs = std::move(params->inputs);
    core.Infer(
        model, std::move(inputs), params->timeout_us, params->priority,
        [self = shared_from_this(), model_ref, params, token](
            Status s, std::vector<NamedTensor> outputs) mutable {
          net::post(self->stream_.get_executor(), [self, model_ref, params, token, s = std::move(s),
                                                   outputs = std::move(outputs)]() mutable {
            self->FinishInfer(*model_ref, *params, std::move(token), s, std::move(outputs));
          });
        });
  }

  void FinishInfer(const Model& model, const InferRequest& params, std::shared_ptr<void> token,
                   Status s, std::vector<NamedTensor> outputs) {
    serving::ModelServer& core = *server_->core;
    std::optional<size_t> json_length;
    std::string body;
    if (s.ok()) {
      auto r = serving::BuildHttpInferResponse(model.desc.name, model.desc.version, params,
                                               std::move(outputs));
      if (r.ok()) {
        body = std::move(r->body);
        json_length = r->json_length;
      } else {
        s = r.status();
      }
    }
    core.Record(&model, "http", s, SecondsSince(received_));
    if (!s.ok()) {
      const bool full = s.code() == StatusCode::kUnavailable;
      return Reply(HttpStatusOf(s), serving::ErrorJson(s.message()), full ? "1" : "", "",
                   std::nullopt, std::move(token));
    }
    Reply(http::status::ok, std::move(body), "",
          json_length ? "application/octet-stream" : "application/json", json_length,
          std::move(token));
  }

  // Sends one response; `retry_after` adds Retry-After; the token (an admitted request) is
  // released once the response is written.
  void Reply(http::status status, std::string body, const std::string& retry_after = "",
             const std::string& content_type = "", std::optional<size_t> json_length = std::nullopt,
             std::shared_ptr<void> token = nullptr) {
    auto res = std::make_shared<Response>(status, request_.version() ? request_.version() : 11);
    res->set(http::field::server, "kiln");
    res->set(http::field::content_type, content_type.empty() ? "application/json" : content_type);
    if (!retry_after.empty()) res->set(http::field::retry_after, retry_after);
    if (json_length) res->set("Inference-Header-Content-Length", std::to_string(*json_length));
    // Draining: every answer closes its connection, so a client's next request opens a new one,
    // which is refused once the server stops listening (not reset).
    if (server_->core->draining()) keep_alive_ = false;
    res->keep_alive(keep_alive_);
    res->body() = std::move(body);
    res->prepare_payload();
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res, token = std::move(token)](
                          beast::error_code ec, size_t) mutable {
                        token.reset();
                        if (ec || !self->keep_alive_) return self->Close();
                        self->ReadHeader();
                      });
  }

  // Half-closes, then reads and drops what the peer still sends (a body refused unread) until it
  // closes too or a second passes: closing with unread bytes would reset the connection, and the
  // peer could lose the answer it has not read yet.
  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) {
      stream_.socket().close(ec);
      return;
    }
    stream_.expires_after(std::chrono::seconds(1));
    Discard();
  }

  void Discard() {
    stream_.async_read_some(net::buffer(discard_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) {
                                beast::error_code ignored;
                                self->stream_.socket().close(ignored);
                                return;
                              }
                              self->Discard();
                            });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  std::shared_ptr<char> direct_;  // a body read by ReadDirect, and where it lies in it
  std::string_view direct_body_;
  serving::HttpState* server_;
  Clock::time_point received_;
  bool keep_alive_ = true;
  std::array<char, 4096> discard_;
};

}  // namespace

void serving::HttpState::Accept() {
  acceptor->async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
    if (!ec) {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);  // answers leave at once (no Nagle)
      const bool over = connections.fetch_add(1) >= options.max_connections;
      std::make_shared<Connection>(std::move(socket), this)->Start(over);
    }
    Accept();
  });
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StatusOr<std::unique_ptr<Server>> Server::Start(std::vector<ServedModel> models,
                                                ServerOptions options) {
  if (options.http_threads < 1) return InvalidArgument("http_threads must be >= 1");
  if (options.max_connections < 1) return InvalidArgument("max_connections must be >= 1");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  auto core =
      serving::ModelServer::Create(std::move(models), options.batch, options.queue_timeout_us,
                                   options.instances, options.repository);
  if (!core.ok()) return core.status();
  impl->core = std::move(*core);
  beast::error_code ec;
  const auto address = net::ip::make_address(options.host, ec);
  if (ec) return InvalidArgument("cannot listen on host '" + options.host + "': " + ec.message());
  impl->acceptor.emplace(impl->ioc);
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(options.http_port));
  impl->acceptor->open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor->bind(endpoint, ec);
  if (!ec) impl->acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    return Unavailable("cannot listen on " + options.host + ":" +
                       std::to_string(options.http_port) + ": " + ec.message());
  impl->port = impl->acceptor->local_endpoint().port();
  if (options.grpc_port >= 0) {
    auto grpc = serving::GrpcFrontend::Start(impl->core.get(), options.host, options.grpc_port,
                                             options.max_body_bytes);
    if (!grpc.ok()) return grpc.status();
    impl->grpc = std::move(*grpc);
  }
  impl->work.emplace(impl->ioc.get_executor());
  impl->Accept();
  Impl* raw = impl.get();
  for (int i = 0; i < options.http_threads; ++i)
    impl->threads.emplace_back([raw] { raw->ioc.run(); });
  impl->warm = std::thread([raw] { raw->core->WarmUp(raw->options.warm_up); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::~Server() {
  Drain();
  if (impl_->warm.joinable()) impl_->warm.join();
  impl_->core->StopControl();  // after what was asked before the stop
  // The batchers run what they still hold (after a drain that timed out) and answer it; then the
  // gRPC server (unless the drain stopped it), the listener and the front end's threads stop, and
  // last the models.
  impl_->core->StopBatchers();
  if (impl_->grpc) impl_->grpc->Shutdown();
  impl_->work.reset();
  impl_->ioc.stop();
  for (std::thread& t : impl_->threads) t.join();
  beast::error_code ec;
  impl_->acceptor->close(ec);
  impl_->grpc.reset();
  impl_->core.reset();
}

int Server::http_port() const { return impl_->port; }
int Server::grpc_port() const { return impl_->grpc ? impl_->grpc->port() : -1; }
bool Server::ready() const { return impl_->core->ready(); }
Status Server::WaitReady() const { return impl_->core->WaitReady(); }
std::string Server::MetricsText() const { return impl_->core->MetricsText(); }
Status Server::LoadModel(const std::string& name) { return impl_->core->Load(name); }
Status Server::UnloadModel(const std::string& name) { return impl_->core->Unload(name); }
void Server::StartTrace() { impl_->core->StartTrace(); }
std::string Server::StopTrace() { return impl_->core->StopTrace(); }

DrainReport Server::Drain() {
  std::lock_guard<std::mutex> lock(impl_->drain_mu);
  if (impl_->drained) return *impl_->drained;
  const auto start = std::chrono::steady_clock::now();
  impl_->drained = impl_->core->Drain(impl_->options.drain_timeout_ms);
  const auto timeout_at = start + std::chrono::milliseconds(impl_->options.drain_timeout_ms);
  // Nothing admitted is left: the gRPC server stops (GrpcFrontend::Drain), alongside the HTTP
  // listener. After a drain that timed out, the destructor stops it instead (after the batchers
  // have answered what they hold).
  std::future<void> grpc_stopped;
  if (impl_->grpc && impl_->drained->unfinished == 0)
    grpc_stopped =
        std::async(std::launch::async, [this, timeout_at] { impl_->grpc->Drain(timeout_at); });
  // HTTP: stop listening (a new connection is refused, not accepted and then reset), then give
  // the connections already accepted the time to get their answer (503 with Connection: close)
  // and close: at most a second, within the drain timeout. Connections still in the kernel's
  // backlog when the listener closes are reset by it: at most one per client that connects per
  // request.
  std::promise<void> closed;
  net::post(impl_->ioc, [this, &closed] {
    beast::error_code ec;
    impl_->acceptor->close(ec);
    closed.set_value();
  });
  closed.get_future().wait();
  const auto until =
      std::min(timeout_at, std::chrono::steady_clock::now() + std::chrono::seconds(1));
  while (impl_->connections.load() > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  if (grpc_stopped.valid()) grpc_stopped.wait();
  return *impl_->drained;
}

}  // namespace kiln
