// InferenceClient (kiln/client.h): HTTP/1.1 with Boost.Beast (synchronous, one keep-alive
// connection, reopened after the server closes it) and gRPC with the generated stub of
// kserve_v2.proto.
// clang-format off
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange
// clang-format on
#include "kiln/client.h"

#include <grpcpp/grpcpp.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "serving/kserve.h"
#include "serving/kserve_v2.grpc.pb.h"

namespace kiln {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
namespace pb = ::inference;

Status FromHttp(int status, const std::string& body) {
  std::string message = body;
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_string())
    message = j["error"].get<std::string>();
  switch (status) {
    case 400:
    case 413:
    case 415:
    case 431:
      return InvalidArgument(message);
    case 404:
      return NotFound(message);
    case 503:
      return Unavailable(message);
    case 504:
      return Status(StatusCode::kDeadlineExceeded, message);
    default:
      return Internal("HTTP " + std::to_string(status) + ": " + message);
  }
}

Status FromGrpc(const grpc::Status& s) {
  switch (s.error_code()) {
    case grpc::StatusCode::OK:
      return OkStatus();
    case grpc::StatusCode::INVALID_ARGUMENT:
      return InvalidArgument(s.error_message());
    case grpc::StatusCode::NOT_FOUND:
      return NotFound(s.error_message());
    case grpc::StatusCode::UNAVAILABLE:
      return Unavailable(s.error_message());
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Status(StatusCode::kDeadlineExceeded, s.error_message());
    default:
      return Internal("gRPC " + std::to_string(static_cast<int>(s.error_code())) + ": " +
                      s.error_message());
  }
}

class HttpClient final : public InferenceClient {
 public:
  HttpClient(std::string host, std::string port, ClientOptions options)
      : host_(std::move(host)), port_(std::move(port)), options_(options), stream_(ioc_) {}

  Status Infer(const std::string& model, const std::vector<NamedTensor>& inputs,
               std::vector<NamedTensor>* outputs) override {
    // Binary tensors are sent from where they lie, after the JSON (one gathering write), not
    // copied into the body first.
    std::optional<size_t> json_length;
    std::string json = serving::BuildHttpInferRequestBody(inputs, !options_.json, &json_length,
                                                          /*append_tensors=*/false);
    std::vector<net::const_buffer> body{net::buffer(json)};
    if (json_length)
      for (const NamedTensor& in : inputs)
        body.push_back(net::buffer(in.tensor.raw(), in.tensor.bytes()));
    http::response<http::string_body> res;
    KILN_RETURN_IF_ERROR(
        Call(http::verb::post, "/v2/models/" + model + "/infer", body, json_length, &res));
    if (res.result_int() != 200) return FromHttp(static_cast<int>(res.result_int()), res.body());
    std::optional<size_t> out_length;
    auto h = res.find("Inference-Header-Content-Length");
    if (h != res.end()) out_length = std::stoul(std::string(h->value()));
    KILN_ASSIGN_OR_RETURN(*outputs, serving::ParseHttpInferResponse(res.body(), out_length));
    return OkStatus();
  }

  StatusOr<std::vector<TensorSpec>> ModelInputs(const std::string& model) override {
    http::response<http::string_body> res;
    KILN_RETURN_IF_ERROR(Call(http::verb::get, "/v2/models/" + model, {}, std::nullopt, &res));
    if (res.result_int() != 200) return FromHttp(static_cast<int>(res.result_int()), res.body());
    return serving::ParseModelMetadataInputs(res.body());
  }

  StatusOr<bool> ServerReady() override {
    http::response<http::string_body> res;
    KILN_RETURN_IF_ERROR(Call(http::verb::get, "/v2/health/ready", {}, std::nullopt, &res));
    return res.result_int() == 200;
  }

 private:
  // One exchange; a stale keep-alive connection is reopened once.
  Status Call(http::verb verb, const std::string& target,
              const std::vector<net::const_buffer>& body, std::optional<size_t> json_length,
              http::response<http::string_body>* res) {
    http::request<http::empty_body> req(verb, target, 11);
    req.set(http::field::host, host_);
    req.keep_alive(true);
    const size_t body_bytes = net::buffer_size(body);
    if (json_length) {
      req.set("Inference-Header-Content-Length", std::to_string(*json_length));
      req.set(http::field::content_type, "application/octet-stream");
    } else if (body_bytes > 0) {
      req.set(http::field::content_type, "application/json");
    }
    if (body_bytes > 0 || verb == http::verb::post) req.content_length(body_bytes);
    std::string head;
    {
      http::request_serializer<http::empty_body> sr(req);
      sr.split(true);
      beast::error_code ec;
      while (!ec && !sr.is_header_done())
        sr.next(ec, [&](beast::error_code&, const auto& buffers) {
          for (const auto b : beast::buffers_range_ref(buffers))
            head.append(static_cast<const char*>(b.data()), b.size());
          sr.consume(beast::buffer_bytes(buffers));
        });
      if (ec) return Internal("cannot write the request header: " + ec.message());
    }
    for (int attempt = 0; attempt < 2; ++attempt) {
      beast::error_code ec;
      if (!connected_) {
        tcp::resolver resolver(ioc_);
        auto endpoints = resolver.resolve(host_, port_, ec);
        if (ec) return Unavailable("cannot resolve " + host_ + ": " + ec.message());
        stream_.expires_after(std::chrono::milliseconds(options_.timeout_ms));
        stream_.connect(endpoints, ec);
        if (ec)
          return Unavailable("cannot connect to " + host_ + ":" + port_ + ": " + ec.message());
        stream_.socket().set_option(tcp::no_delay(true), ec);
        connected_ = true;
      }
      stream_.expires_after(std::chrono::milliseconds(options_.timeout_ms));
      std::vector<net::const_buffer> out{net::buffer(head)};
      out.insert(out.end(), body.begin(), body.end());
      net::write(stream_, out, ec);  // header and body in one gathering write
      if (!ec) {
        beast::flat_buffer buffer;
        buffer.reserve(64 * 1024);  // Beast reads at most the free capacity (512 B when empty)
        http::response_parser<http::string_body> parser;
        parser.body_limit(std::numeric_limits<std::uint64_t>::max());
        http::read(stream_, buffer, parser, ec);
        if (!ec) {
          *res = parser.release();
          if (!res->keep_alive()) Reset();
          return OkStatus();
        }
      }
      Reset();
      if (ec == beast::error::timeout)
        return Status(StatusCode::kDeadlineExceeded,
                      "no answer within " + std::to_string(options_.timeout_ms) + " ms");
      if (attempt == 1) return Unavailable("the connection failed: " + ec.message());
    }
    return Unavailable("the connection failed");
  }

  void Reset() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
    connected_ = false;
  }

  std::string host_, port_;
  ClientOptions options_;
  net::io_context ioc_;
  beast::tcp_stream stream_;
  bool connected_ = false;
};

class GrpcClient final : public InferenceClient {
 public:
  GrpcClient(const std::string& target, ClientOptions options) : options_(options) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    // A channel of its own per client, so concurrent clients do not share one connection.
    args.SetInt("grpc.use_local_subchannel_pool", 1);
    stub_ = pb::GRPCInferenceService::NewStub(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
  }

  Status Infer(const std::string& model, const std::vector<NamedTensor>& inputs,
               std::vector<NamedTensor>* outputs) override {
    pb::ModelInferRequest req;
    req.set_model_name(model);
    for (const NamedTensor& in : inputs) {
      auto* t = req.add_inputs();
      t->set_name(in.name);
      t->set_datatype(serving::KServeDatatype(in.tensor.dtype()));
      for (int64_t d : in.tensor.shape()) t->add_shape(d);
      req.add_raw_input_contents(static_cast<const char*>(in.tensor.raw()), in.tensor.bytes());
    }
    pb::ModelInferResponse res;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    KILN_RETURN_IF_ERROR(FromGrpc(stub_->ModelInfer(&ctx, req, &res)));
    if (res.raw_output_contents_size() != res.outputs_size())
      return Internal("the response has " + std::to_string(res.outputs_size()) + " outputs and " +
                      std::to_string(res.raw_output_contents_size()) + " raw contents");
    outputs->clear();
    for (int i = 0; i < res.outputs_size(); ++i) {
      const auto& o = res.outputs(i);
      const DataType type = serving::FromKServeDatatype(o.datatype());
      if (type == DataType::kUndefined)
        return Internal("output '" + o.name() + "' has datatype " + o.datatype());
      Tensor t = Tensor::Empty(type, Shape(o.shape().begin(), o.shape().end()));
      const std::string& raw = res.raw_output_contents(i);
      if (raw.size() != t.bytes())
        return Internal("output '" + o.name() + "': " + std::to_string(raw.size()) + " bytes for " +
                        std::to_string(t.bytes()));
      if (!raw.empty()) std::memcpy(t.raw(), raw.data(), raw.size());
      outputs->push_back({o.name(), std::move(t)});
    }
    return OkStatus();
  }

  StatusOr<std::vector<TensorSpec>> ModelInputs(const std::string& model) override {
    pb::ModelMetadataRequest req;
    req.set_name(model);
    pb::ModelMetadataResponse res;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    KILN_RETURN_IF_ERROR(FromGrpc(stub_->ModelMetadata(&ctx, req, &res)));
    std::vector<TensorSpec> specs;
    for (const auto& in : res.inputs()) {
      TensorSpec s;
      s.name = in.name();
      s.dtype = serving::FromKServeDatatype(in.datatype());
      s.dims.assign(in.shape().begin(), in.shape().end());
      s.dim_names.assign(s.dims.size(), "");
      s.rank_known = true;
      specs.push_back(std::move(s));
    }
    return specs;
  }

  StatusOr<bool> ServerReady() override {
    pb::ServerReadyRequest req;
    pb::ServerReadyResponse res;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    KILN_RETURN_IF_ERROR(FromGrpc(stub_->ServerReady(&ctx, req, &res)));
    return res.ready();
  }

 private:
  void SetDeadline(grpc::ClientContext* ctx) const {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(options_.timeout_ms));
  }
  ClientOptions options_;
  std::unique_ptr<pb::GRPCInferenceService::Stub> stub_;
};

}  // namespace

StatusOr<std::unique_ptr<InferenceClient>> InferenceClient::Create(const std::string& url,
                                                                   ClientOptions options) {
  auto split = [&](const std::string& rest, std::string* host, std::string* port) {
    const size_t colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size()) return false;
    *host = rest.substr(0, colon);
    *port = rest.substr(colon + 1);
    return port->find_first_not_of("0123456789") == std::string::npos;
  };
  std::string host, port;
  if (url.rfind("http://", 0) == 0 && split(url.substr(7), &host, &port))
    return std::unique_ptr<InferenceClient>(new HttpClient(host, port, options));
  if (url.rfind("grpc://", 0) == 0 && split(url.substr(7), &host, &port))
    return std::unique_ptr<InferenceClient>(new GrpcClient(host + ":" + port, options));
  return InvalidArgument("server URL must be http://HOST:PORT or grpc://HOST:PORT; got '" + url +
                         "'");
}

}  // namespace kiln
