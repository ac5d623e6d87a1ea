// kiln serve's gRPC front end with a raw stub (requests tritonclient would never send: sizes that
// do not match their shape, a huge declared shape, BYTES, a wrong number of raw contents), and
// kiln::InferenceClient (include/kiln/client.h) against a live server over HTTP (binary and
// JSON) and gRPC: metadata, readiness, values, and every refusal mapped back to its Status code.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

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
  // After the drain: gRPC refuses as Unavailable with the server's message; the HTTP listener
  // is closed once nothing admitted is left, so a new connection is refused.
  server->Drain();
  {
    auto client = InferenceClient::Create(grpc);
    ASSERT_TRUE(client.ok());
    std::vector<NamedTensor> out;
    const Status s = (*client)->Infer("relu", {{"x", x}}, &out);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
    EXPECT_NE(s.message().find("shutting down"), std::string::npos) << s.message();
    auto ready = (*client)->ServerReady();
    ASSERT_TRUE(ready.ok());
    EXPECT_FALSE(*ready);
  }
  {
    auto client = InferenceClient::Create(http);
    ASSERT_TRUE(client.ok());
    std::vector<NamedTensor> out;
    const Status s = (*client)->Infer("relu", {{"x", x}}, &out);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
    EXPECT_NE(s.message().find("refused"), std::string::npos) << s.message();
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
