// kiln serve's gRPC front end with a raw stub (requests tritonclient would never send: sizes that
// do not match their shape, a huge declared shape, BYTES, a wrong number of raw contents; the
// repository methods and their refusals; the drain), and kiln::InferenceClient
// (include/kiln/client.h) against a live server over HTTP (binary and JSON) and gRPC: metadata,
// readiness, values, and every refusal mapped back to its Status code.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "kiln/client.h"
#include "kiln/server.h"
#include "onnx/model_builder.h"
#include "serving/kserve_v2.grpc.pb.h"

namespace kiln {
namespace {

using onnxio::ModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;

// y = Relu(x) + 1 over x [N, width].
std::shared_ptr<const Session> ReluPlusOne(int64_t width = 4) {
  ModelBuilder m;
  m.Input("x", kF32, {-1, width}).Output("y", kF32, {-1, width});
  m.FloatInit("one", {}, {1.f});
  m.Node("Relu", {"x"}, {"r"});
  m.Node("Add", {"r", "one"}, {"y"});
  auto s = Session::LoadFromBytes(m.Bytes());
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::shared_ptr<const Session>(std::move(*s)) : nullptr;
}

std::unique_ptr<Server> Start() {
  ServerOptions o;
  o.host = "127.0.0.1";
  o.http_port = 0;
  o.grpc_port = 0;
  o.batch.max_batch = 8;
  auto server =
      Server::Start({{"relu", "1", ReluPlusOne()}, {"wide", "1", ReluPlusOne(200000)}}, o);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  if (!server.ok()) return nullptr;
  EXPECT_TRUE((*server)->WaitReady().ok());
  return std::move(*server);
}

inference::ModelInferRequest Request(const std::vector<int64_t>& shape, size_t raw_bytes) {
  inference::ModelInferRequest req;
  req.set_model_name("relu");
  auto* in = req.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  for (int64_t d : shape) in->add_shape(d);
  req.add_raw_input_contents(std::string(raw_bytes, '\0'));
  return req;
}

TEST(GrpcServerTest, SizesAreCheckedAgainstWhatWasSent) {
  auto server = Start();
  ASSERT_NE(server, nullptr);
  auto stub = inference::GRPCInferenceService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(server->grpc_port()), grpc::InsecureChannelCredentials()));
  auto call = [&](const inference::ModelInferRequest& req, inference::ModelInferResponse* res) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return stub->ModelInfer(&ctx, req, res);
  };
  inference::ModelInferResponse res;
  // A good request: raw in, raw out, Relu(x) + 1.
  inference::ModelInferRequest good = Request({1, 4}, 0);
  const float x[4] = {-2, 0, 1, 3};
  good.set_raw_input_contents(0, std::string(reinterpret_cast<const char*>(x), sizeof(x)));
  grpc::Status s = call(good, &res);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(res.raw_output_contents_size(), 1);
  float y[4];
  ASSERT_EQ(res.raw_output_contents(0).size(), sizeof(y));
  std::memcpy(y, res.raw_output_contents(0).data(), sizeof(y));
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[3], 4.f);

  struct Case {
    const char* name;
    inference::ModelInferRequest req;
    grpc::StatusCode code;
    const char* message;
  };
  inference::ModelInferRequest typed_short = Request({1, 4}, 0);
  typed_short.clear_raw_input_contents();
  typed_short.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1.f);
  typed_short.mutable_inputs(0)->mutable_contents()->add_fp32_contents(2.f);
  inference::ModelInferRequest bytes = Request({1}, 0);
  bytes.mutable_inputs(0)->set_datatype("BYTES");
  inference::ModelInferRequest two_raw = Request({1, 4}, 16);
  two_raw.add_raw_input_contents(std::string(16, '\0'));
  inference::ModelInferRequest unknown = Request({1, 4}, 16);
  unknown.set_model_name("nope");
  const std::vector<Case> cases = {
      // 1.6e12 bytes claimed, 16 sent: refused before anything is allocated.
      {"huge declared shape", Request({100000000000, 4}, 16), grpc::StatusCode::INVALID_ARGUMENT,
       "raw_input_contents has 16"},
      {"raw size short", Request({2, 4}, 16), grpc::StatusCode::INVALID_ARGUMENT,
       "is 32 bytes; raw_input_contents has 16"},
      {"typed contents short", typed_short, grpc::StatusCode::INVALID_ARGUMENT, "contents has 2"},
      {"BYTES", bytes, grpc::StatusCode::INVALID_ARGUMENT, "BYTES is not supported"},
      {"raw count", two_raw, grpc::StatusCode::INVALID_ARGUMENT, "2 raw_input_contents"},
      {"wrong shape", Request({1, 5}, 20), grpc::StatusCode::INVALID_ARGUMENT,
       "input 'x': expected float32[N,4]"},
      {"unknown model", unknown, grpc::StatusCode::NOT_FOUND, "unknown model 'nope'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const grpc::Status st = call(c.req, &res);
    EXPECT_EQ(st.error_code(), c.code);
    EXPECT_NE(st.error_message().find(c.message), std::string::npos) << st.error_message();
  }
}

TEST(InferenceClientTest, HttpBinaryHttpJsonAndGrpc) {
  auto server = Start();
  ASSERT_NE(server, nullptr);
  const std::string http = "http://127.0.0.1:" + std::to_string(server->http_port());
  const std::string grpc = "grpc://127.0.0.1:" + std::to_string(server->grpc_port());
  struct Target {
    std::string url;
    bool json;
  };
  const Tensor x = Tensor::FromVector<float>({-1, 0, 2, 5, 7, -3, 1, 0}, {2, 4});
  for (const Target& t : {Target{http, false}, Target{http, true}, Target{grpc, false}}) {
    SCOPED_TRACE(t.url + (t.json ? " json" : ""));
    ClientOptions opts;
    opts.json = t.json;
    auto client = InferenceClient::Create(t.url, opts);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    auto ready = (*client)->ServerReady();
    ASSERT_TRUE(ready.ok()) << ready.status().ToString();
    EXPECT_TRUE(*ready);
    auto inputs = (*client)->ModelInputs("relu");
    ASSERT_TRUE(inputs.ok()) << inputs.status().ToString();
    ASSERT_EQ(inputs->size(), 1u);
    EXPECT_EQ((*inputs)[0].name, "x");
    EXPECT_EQ((*inputs)[0].dims, (std::vector<int64_t>{-1, 4}));
    std::vector<NamedTensor> out;
    Status s = (*client)->Infer("relu", {{"x", x}}, &out);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].name, "y");
    EXPECT_EQ(out[0].tensor.shape(), (Shape{2, 4}));
    EXPECT_EQ(out[0].tensor.data<float>()[3], 6.f);
    EXPECT_EQ(out[0].tensor.data<float>()[5], 1.f);
    EXPECT_EQ((*client)->Infer("nope", {{"x", x}}, &out).code(), StatusCode::kNotFound);
    s = (*client)->Infer("relu", {{"x", Tensor::Empty(DataType::kFloat, {1, 5})}}, &out);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("input 'x'"), std::string::npos) << s.message();
    EXPECT_EQ((*client)->ModelInputs("nope").status().code(), StatusCode::kNotFound);
    // 800 KB, over many reads (HTTP binary reads it straight into the tensors' buffer), then
    // every value checked; twice on the same connection.
    if (!t.json) {
      std::vector<float> big(200000);
      for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 13) - 6.f;
      const Tensor bx = Tensor::FromVector(big, {1, 200000});
      for (int round = 0; round < 2; ++round) {
        s = (*client)->Infer("wide", {{"x", bx}}, &out);
        ASSERT_TRUE(s.ok()) << s.ToString();
        ASSERT_EQ(out.at(0).tensor.shape(), (Shape{1, 200000}));
        size_t wrong = 0;
        for (size_t i = 0; i < big.size(); ++i)
          wrong += out[0].tensor.data<float>()[i] != std::max(big[i], 0.f) + 1.f;
        EXPECT_EQ(wrong, 0u);
      }
    }
  }
  // After the drain both listeners are closed (once nothing admitted is left): a new
  // connection is refused, which both clients report as Unavailable.
  server->Drain();
  for (const std::string& url : {grpc, http}) {
    SCOPED_TRACE(url);
    auto client = InferenceClient::Create(url);
    ASSERT_TRUE(client.ok());
    std::vector<NamedTensor> out;
    const Status s = (*client)->Infer("relu", {{"x", x}}, &out);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
    EXPECT_NE(s.message().find("refused"), std::string::npos) << s.message();
  }
}

// A model that takes a while per sample (4.3 GFLOP): 64 chained MatMuls over x [N, 512, 256].
std::shared_ptr<const Session> Slow() {
  ModelBuilder m;
  m.Input("x", kF32, {-1, 512, 256}).Output("y", kF32, {-1, 512, 256});
  m.FloatInit("w", {256, 256}, std::vector<float>(256 * 256, 1.f / 256));
  std::string prev = "x";
  for (int i = 0; i < 64; ++i) {
    const std::string out = i == 63 ? "y" : "h" + std::to_string(i);
    m.Node("MatMul", {prev, "w"}, {out});
    prev = out;
  }
  auto s = Session::LoadFromBytes(m.Bytes());
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::shared_ptr<const Session>(std::move(*s)) : nullptr;
}

using Stub = std::unique_ptr<inference::GRPCInferenceService::Stub>;

Stub NewStub(const Server& server) {
  return inference::GRPCInferenceService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(server.grpc_port()), grpc::InsecureChannelCredentials()));
}

// One unary call with a 30 s deadline.
template <typename Req, typename Res, typename Method>
grpc::Status Call(const Stub& stub, Method method, const Req& req, Res* res) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return ((*stub).*method)(&ctx, req, res);
}

std::map<std::string, std::string> Index(const Stub& stub, bool ready_only) {
  inference::RepositoryIndexRequest req;
  req.set_ready(ready_only);
  inference::RepositoryIndexResponse res;
  const grpc::Status s =
      Call(stub, &inference::GRPCInferenceService::Stub::RepositoryIndex, req, &res);
  EXPECT_TRUE(s.ok()) << s.error_message();
  std::map<std::string, std::string> index;
  for (const auto& m : res.models()) index[m.name()] = m.state() + "/" + m.reason();
  return index;
}

grpc::Status Control(const Stub& stub, const std::string& name, bool load,
                     const std::string& parameter = "") {
  if (load) {
    inference::RepositoryModelLoadRequest req;
    req.set_model_name(name);
    if (!parameter.empty()) (*req.mutable_parameters())[parameter].set_string_param("{}");
    inference::RepositoryModelLoadResponse res;
    return Call(stub, &inference::GRPCInferenceService::Stub::RepositoryModelLoad, req, &res);
  }
  inference::RepositoryModelUnloadRequest req;
  req.set_model_name(name);
  inference::RepositoryModelUnloadResponse res;
  return Call(stub, &inference::GRPCInferenceService::Stub::RepositoryModelUnload, req, &res);
}

bool ModelReady(const Stub& stub, const std::string& name) {
  inference::ModelReadyRequest req;
  req.set_name(name);
  inference::ModelReadyResponse res;
  const grpc::Status s = Call(stub, &inference::GRPCInferenceService::Stub::ModelReady, req, &res);
  EXPECT_TRUE(s.ok()) << s.error_message();  // an unknown model is not ready, not an error
  return res.ready();
}

TEST(GrpcServerTest, RepositoryIndexLoadAndUnload) {
  ServerOptions o;
  o.host = "127.0.0.1";
  o.http_port = 0;
  o.grpc_port = 0;
  int loads = 0;
  o.repository = [&](const std::string& name) -> StatusOr<ServedModel> {
    if (name != "relu") return NotFound("the repository has no model named '" + name + "'");
    ++loads;
    return ServedModel{name, std::to_string(loads + 1), ReluPlusOne()};
  };
  auto server = Server::Start({{"relu", "1", ReluPlusOne()}, {"other", "1", ReluPlusOne()}}, o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE((*server)->WaitReady().ok());
  const Stub stub = NewStub(**server);
  using IndexMap = std::map<std::string, std::string>;
  EXPECT_EQ(Index(stub, false), (IndexMap{{"other", "READY/"}, {"relu", "READY/"}}));

  ASSERT_TRUE(Control(stub, "relu", false).ok());
  EXPECT_FALSE(ModelReady(stub, "relu"));
  EXPECT_TRUE(ModelReady(stub, "other"));
  EXPECT_EQ(Index(stub, false), (IndexMap{{"other", "READY/"}, {"relu", "UNAVAILABLE/unloaded"}}));
  EXPECT_EQ(Index(stub, true), (IndexMap{{"other", "READY/"}}));
  inference::ModelInferResponse res;
  grpc::Status s =
      Call(stub, &inference::GRPCInferenceService::Stub::ModelInfer, Request({1, 4}, 16), &res);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();

  struct Case {
    const char* what;
    grpc::Status status;
    grpc::StatusCode code;
    const char* message;
  };
  inference::RepositoryModelLoadRequest named;
  named.set_repository_name("models");
  named.set_model_name("relu");
  inference::RepositoryModelLoadResponse load_res;
  const std::vector<Case> cases = {
      {"unload again", Control(stub, "relu", false), grpc::StatusCode::NOT_FOUND,
       "failed to unload model 'relu': model 'relu' is not loaded"},
      {"not in the repository", Control(stub, "nope", true), grpc::StatusCode::NOT_FOUND,
       "failed to load model 'nope': the repository has no model named 'nope'"},
      {"a config", Control(stub, "relu", true, "config"), grpc::StatusCode::UNIMPLEMENTED,
       "'config' parameter is not supported"},
      {"a file", Control(stub, "relu", true, "file:1/model.onnx"), grpc::StatusCode::UNIMPLEMENTED,
       "'file:1/model.onnx' parameter is not supported"},
      {"no name", Control(stub, "", true), grpc::StatusCode::INVALID_ARGUMENT,
       "model_name is empty"},
      {"a repository name",
       Call(stub, &inference::GRPCInferenceService::Stub::RepositoryModelLoad, named, &load_res),
       grpc::StatusCode::UNIMPLEMENTED, "repository_name 'models' is not supported"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(c.status.error_code(), c.code);
    EXPECT_NE(c.status.error_message().find(c.message), std::string::npos)
        << c.status.error_message();
  }
  EXPECT_EQ(loads, 0);  // no refusal loaded anything

  ASSERT_TRUE(Control(stub, "relu", true).ok());
  EXPECT_TRUE(ModelReady(stub, "relu"));
  EXPECT_EQ(Index(stub, false), (IndexMap{{"other", "READY/"}, {"relu", "READY/"}}));
  inference::ModelMetadataRequest meta_req;
  meta_req.set_name("relu");
  inference::ModelMetadataResponse meta;
  ASSERT_TRUE(
      Call(stub, &inference::GRPCInferenceService::Stub::ModelMetadata, meta_req, &meta).ok());
  EXPECT_EQ(meta.versions(0), "2");               // the repository's copy
  ASSERT_TRUE(Control(stub, "relu", true).ok());  // a reload replaces it
  ASSERT_TRUE(
      Call(stub, &inference::GRPCInferenceService::Stub::ModelMetadata, meta_req, &meta).ok());
  EXPECT_EQ(meta.versions(0), "3");

  // Model control off: refused before anything else is looked at.
  o.repository = nullptr;
  auto plain = Server::Start({{"relu", "1", ReluPlusOne()}}, o);
  ASSERT_TRUE(plain.ok());
  const Stub plain_stub = NewStub(**plain);
  for (bool load : {true, false}) {
    s = Control(plain_stub, "relu", load);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
    EXPECT_NE(s.error_message().find("--model-control-mode explicit"), std::string::npos);
  }
}

// The drain over gRPC: the call in flight is answered, new calls get UNAVAILABLE from the server
// while it lasts, and once nothing admitted is left the gRPC server stops (the port refuses
// connections) without waiting for the drain timeout; a channel that was open sees refusals,
// not CANCELLED.
TEST(GrpcServerTest, DrainAnswersInFlightThenStops) {
  ServerOptions o;
  o.host = "127.0.0.1";
  o.http_port = 0;
  o.grpc_port = 0;
  o.batch.max_batch = 1;
  o.drain_timeout_ms = 60000;
  auto server = Server::Start({{"slow", "1", Slow()}, {"relu", "1", ReluPlusOne()}}, o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE((*server)->WaitReady().ok());
  const Stub stub = NewStub(**server);
  inference::ModelInferRequest slow;
  slow.set_model_name("slow");
  auto* in = slow.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  for (int64_t d : {1, 512, 256}) in->add_shape(d);
  slow.add_raw_input_contents(std::string(512 * 256 * sizeof(float), '\0'));
  grpc::Status slow_status;
  inference::ModelInferResponse slow_res;
  std::thread in_flight([&] {
    slow_status = Call(stub, &inference::GRPCInferenceService::Stub::ModelInfer, slow, &slow_res);
  });
  const std::string in_flight_line = "\nkiln_inflight_requests 1\n";
  for (int i = 0; i < 5000 && (*server)->MetricsText().find(in_flight_line) == std::string::npos;
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_NE((*server)->MetricsText().find(in_flight_line), std::string::npos);

  const auto start = std::chrono::steady_clock::now();
  DrainReport report;
  std::thread drainer([&] { report = (*server)->Drain(); });
  inference::ServerReadyResponse ready;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_TRUE(Call(stub, &inference::GRPCInferenceService::Stub::ServerReady,
                     inference::ServerReadyRequest(), &ready)
                    .ok());
  } while (ready.ready());
  inference::ModelInferResponse res;
  grpc::Status s =
      Call(stub, &inference::GRPCInferenceService::Stub::ModelInfer, Request({1, 4}, 16), &res);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_EQ(s.error_message(), "the server is shutting down");
  drainer.join();
  in_flight.join();
  const double drain_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(slow_status.ok()) << slow_status.error_message();
  EXPECT_EQ(slow_res.raw_output_contents_size(), 1);
  EXPECT_EQ(report.in_flight_at_start, 1u);
  EXPECT_EQ(report.unfinished, 0u);
  EXPECT_LT(drain_s, report.elapsed_ms / 1000.0 + 2.0);  // not the 60 s drain timeout
  // The channel that was open, and a new one: refused.
  const Stub fresh = NewStub(**server);
  for (const Stub* st : {&stub, &fresh}) {
    s = Call(*st, &inference::GRPCInferenceService::Stub::ModelInfer, Request({1, 4}, 16), &res);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
    EXPECT_NE(s.error_message().find("refused"), std::string::npos) << s.error_message();
  }
}

TEST(InferenceClientTest, BadUrlsAndUnreachableServers) {
  for (const char* url : {"ftp://127.0.0.1:1", "http://127.0.0.1", "grpc://:80", "127.0.0.1:8000",
                          "http://127.0.0.1:80x"}) {
    auto c = InferenceClient::Create(url);
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << url;
    if (!c.ok()) {
      EXPECT_NE(c.status().message().find("http://HOST:PORT or grpc://HOST:PORT"),
                std::string::npos);
    }
  }
  // Port 1 on loopback: nothing listens (connection refused).
  ClientOptions quick;
  quick.timeout_ms = 2000;
  for (const char* url : {"http://127.0.0.1:1", "grpc://127.0.0.1:1"}) {
    auto c = InferenceClient::Create(url, quick);
    ASSERT_TRUE(c.ok()) << url;
    std::vector<NamedTensor> out;
    const Status s = (*c)->Infer("m", {{"x", Tensor::Empty(DataType::kFloat, {1})}}, &out);
    EXPECT_FALSE(s.ok()) << url;
    EXPECT_TRUE(s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded)
        << url << ": " << s.ToString();
  }
}

}  // namespace
}  // namespace kiln
