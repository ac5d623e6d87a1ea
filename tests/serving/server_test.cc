// kiln::Server (include/kiln/server.h) over real loopback sockets with a blocking Beast client:
// health and readiness, metadata, JSON and binary inference checked against Session::Run, errors
// that leave the server up (404, 400 naming the input, 405, 413 decided from Content-Length, 431),
// a full queue (503 with Retry-After), the drain (accepted requests finish, new ones get 503), and
// the Prometheus text.
#include "kiln/server.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "onnx/model_builder.h"

namespace kiln {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using nlohmann::json;
using onnxio::ModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;

struct Reply {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;
};

// One request on a fresh connection. `raw_header` replaces the whole header when set.
Reply Send(int port, http::verb verb, const std::string& target, const std::string& body = "",
           std::map<std::string, std::string> headers = {}) {
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.connect(
      tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
  http::request<http::string_body> req(verb, target, 11);
  req.set(http::field::host, "localhost");
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1u << 30);
  beast::error_code ec;
  http::read(stream, buffer, parser, ec);
  Reply r;
  if (ec) return r;
  r.status = static_cast<int>(parser.get().result_int());
  r.body = parser.get().body();
  for (const auto& f : parser.get())
    r.headers[std::string(f.name_string())] = std::string(f.value());
  return r;
}

// y = Relu(x) + 1 over x [N, 4].
std::shared_ptr<const Session> ReluPlusOne() {
  ModelBuilder m;
  m.Input("x", kF32, {-1, 4}).Output("y", kF32, {-1, 4});
  m.FloatInit("one", {}, {1.f});
  m.Node("Relu", {"x"}, {"r"});
  m.Node("Add", {"r", "one"}, {"y"});
  auto s = Session::LoadFromBytes(m.Bytes());
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::shared_ptr<const Session>(std::move(*s)) : nullptr;
}

// Chained MatMuls over x [N, 512, 256], 67 MFLOP each.
std::shared_ptr<const Session> MatMulChain(int length) {
  ModelBuilder m;
  m.Input("x", kF32, {-1, 512, 256}).Output("y", kF32, {-1, 512, 256});
  m.FloatInit("w", {256, 256}, std::vector<float>(256 * 256, 1.f / 256));
  std::string prev = "x";
  for (int i = 0; i < length; ++i) {
    const std::string out = i == length - 1 ? "y" : "h" + std::to_string(i);
    m.Node("MatMul", {prev, "w"}, {out});
    prev = out;
  }
  auto s = Session::LoadFromBytes(m.Bytes());
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::shared_ptr<const Session>(std::move(*s)) : nullptr;
}

// A model that takes at least about 150 ms per sample on this machine, whatever its CPU: the tests
// below need requests to wait behind a run (queue full, queue timeout of 20 ms, drain). A fixed
// 128 MatMuls (8.6 GFLOP) took 100 ms on an AVX2 EPYC and 18 ms on an AVX-512 one, where the
// requests sent 10 ms apart no longer waited. The chain is lengthened from one timed run.
std::shared_ptr<const Session> Slow() {
  static const int length = [] {
    auto probe = MatMulChain(128);
    if (probe == nullptr) return 128;
    const std::vector<float> x(512 * 256, 0.5f);
    std::vector<NamedTensor> y;
    double ms = 1e9;
    for (int i = 0; i < 2; ++i) {  // the faster of two: the first also warms up
      const auto t0 = std::chrono::steady_clock::now();
      if (!probe->Run({{"x", Tensor::FromVector(x, {1, 512, 256})}}, &y).ok()) return 128;
      ms = std::min(
          ms,
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return static_cast<int>(128 * std::clamp(std::ceil(150.0 / ms), 1.0, 32.0));
  }();
  return MatMulChain(length);
}

// One sample for Slow(), as binary (parsed in microseconds, so arrival order is send order).
Reply SendSlow(int port) {
  const std::string header = json{{"inputs",
                                   {{{"name", "x"},
                                     {"shape", {1, 512, 256}},
                                     {"datatype", "FP32"},
                                     {"parameters", {{"binary_data_size", 512 * 256 * 4}}}}}}}
                                 .dump();
  std::string body = header;
  const std::vector<float> x(512 * 256, 0.5f);
  body.append(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float));
  return Send(port, http::verb::post, "/v2/models/slow/infer", body,
              {{"Inference-Header-Content-Length", std::to_string(header.size())}});
}

// The number after `name ` in the metrics text (-1 when absent).
double Metric(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

ServerOptions Options() {
  ServerOptions o;
  o.host = "127.0.0.1";
  o.http_port = 0;
  o.batch.max_batch = 8;
  return o;
}

TEST(ServerTest, HealthMetadataAndInference) {
  auto session = ReluPlusOne();
  ASSERT_NE(session, nullptr);
  auto server = Server::Start({{"relu", "3", session}}, Options());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE((*server)->WaitReady().ok());
  const int port = (*server)->http_port();
  EXPECT_EQ(Send(port, http::verb::get, "/v2/health/live").status, 200);
  EXPECT_EQ(Send(port, http::verb::get, "/v2/health/ready").status, 200);
  EXPECT_EQ(Send(port, http::verb::get, "/v2/models/relu/ready").status, 200);
  EXPECT_EQ(json::parse(Send(port, http::verb::get, "/v2").body)["name"], "kiln");
  const json meta = json::parse(Send(port, http::verb::get, "/v2/models/relu").body);
  EXPECT_EQ(meta["inputs"][0]["shape"], json::parse("[-1,4]"));
  EXPECT_EQ(meta["versions"][0], "3");
  EXPECT_EQ(
      json::parse(Send(port, http::verb::get, "/v2/models/relu/config").body)["max_batch_size"], 8);

  // JSON in, JSON out; the values are Session::Run's.
  const std::vector<float> x = {-2, -1, 0, 1, 2, 3, -4, 5};
  std::vector<NamedTensor> direct;
  ASSERT_TRUE(session->Run({{"x", Tensor::FromVector<float>(x, {2, 4})}}, &direct).ok());
  json req = {{"id", "a"},
              {"inputs", {{{"name", "x"}, {"shape", {2, 4}}, {"datatype", "FP32"}, {"data", x}}}}};
  Reply r = Send(port, http::verb::post, "/v2/models/relu/versions/3/infer", req.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json out = json::parse(r.body);
  EXPECT_EQ(out["id"], "a");
  EXPECT_EQ(out["model_version"], "3");
  ASSERT_EQ(out["outputs"][0]["data"].size(), 8u);
  for (size_t i = 0; i < 8; ++i)
    EXPECT_EQ(out["outputs"][0]["data"][i].get<float>(), direct[0].tensor.data<float>()[i]);

  // Binary in, binary out.
  const std::string header =
      json{{"inputs",
            {{{"name", "x"},
              {"shape", {2, 4}},
              {"datatype", "FP32"},
              {"parameters", {{"binary_data_size", 32}}}}}},
           {"outputs", {{{"name", "y"}, {"parameters", {{"binary_data", true}}}}}}}
          .dump();
  std::string body = header;
  body.append(reinterpret_cast<const char*>(x.data()), 32);
  r = Send(port, http::verb::post, "/v2/models/relu/infer", body,
           {{"Inference-Header-Content-Length", std::to_string(header.size())}});
  ASSERT_EQ(r.status, 200) << r.body;
  const size_t json_length = std::stoul(r.headers.at("Inference-Header-Content-Length"));
  ASSERT_EQ(r.body.size(), json_length + 32);
  EXPECT_EQ(
      json::parse(r.body.substr(0, json_length))["outputs"][0]["parameters"]["binary_data_size"],
      32);
  EXPECT_EQ(std::memcmp(r.body.data() + json_length, direct[0].tensor.raw(), 32), 0);

  // Stats count what ran.
  const json stats = json::parse(Send(port, http::verb::get, "/v2/models/relu/stats").body);
  EXPECT_EQ(stats["model_stats"][0]["inference_stats"]["success"]["count"], 2);
  EXPECT_EQ(stats["model_stats"][0]["inference_count"], 4);  // samples
}

TEST(ServerTest, ModelControlLoadsUnloadsAndReloads) {
  auto session = ReluPlusOne();
  ASSERT_NE(session, nullptr);
  int loads = 0;
  ServerOptions o = Options();
  o.repository = [&](const std::string& name) -> StatusOr<ServedModel> {
    if (name != "relu") return NotFound("the repository has no model named '" + name + "'");
    ++loads;
    return ServedModel{"relu", std::to_string(loads + 1), ReluPlusOne()};
  };
  auto server = Server::Start({{"relu", "1", session}}, o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE((*server)->WaitReady().ok());
  const int port = (*server)->http_port();
  const std::string infer = R"({"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32",)"
                            R"("data":[1,2,3,4]}]})";
  ASSERT_EQ(Send(port, http::verb::post, "/v2/models/relu/infer", infer).status, 200);

  EXPECT_EQ(Send(port, http::verb::post, "/v2/repository/models/relu/unload", "{}").status, 200);
  EXPECT_EQ(Send(port, http::verb::post, "/v2/models/relu/infer", infer).status, 404);
  json index = json::parse(Send(port, http::verb::post, "/v2/repository/index", "{}").body);
  ASSERT_EQ(index.size(), 1u);
  EXPECT_EQ(index[0]["state"], "UNAVAILABLE");
  EXPECT_EQ(Send(port, http::verb::post, "/v2/repository/models/relu/unload").status, 400);

  EXPECT_EQ(Send(port, http::verb::post, "/v2/repository/models/relu/load").status, 200);
  Reply r = Send(port, http::verb::post, "/v2/models/relu/infer", infer);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["model_version"], "2");  // the repository's new copy
  ASSERT_TRUE((*server)->LoadModel("relu").ok());        // a reload replaces it
  EXPECT_EQ(json::parse(Send(port, http::verb::get, "/v2/models/relu").body)["versions"][0], "3");
  EXPECT_EQ(loads, 2);

  r = Send(port, http::verb::post, "/v2/repository/models/other/load");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("no model named 'other'"), std::string::npos) << r.body;
  EXPECT_EQ(Send(port, http::verb::post, "/v2/repository/models/relu/load",
                 R"({"parameters":{"config":"{}"}})")
                .status,
            400);
  EXPECT_EQ(Send(port, http::verb::get, "/v2/repository/models/relu/load").status, 405);
}

TEST(ServerTest, TraceHoldsBatchesKernelsAndQueueWaits) {
  auto session = ReluPlusOne();
  auto server = Server::Start({{"relu", "1", session}}, Options());
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE((*server)->WaitReady().ok());
  const int port = (*server)->http_port();
  const std::string infer = R"({"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32",)"
                            R"("data":[1,2,3,4]}]})";
  ASSERT_EQ(Send(port, http::verb::post, "/v2/models/relu/infer", infer).status, 200);  // untraced
  (*server)->StartTrace();
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c)
    clients.emplace_back([&] {
      for (int i = 0; i < 5; ++i)
        EXPECT_EQ(Send(port, http::verb::post, "/v2/models/relu/infer", infer).status, 200);
    });
  for (auto& t : clients) t.join();
  const json trace = json::parse((*server)->StopTrace());
  ASSERT_EQ(Send(port, http::verb::post, "/v2/models/relu/infer", infer).status, 200);  // untraced
  int requests = 0, begins = 0, ends = 0, kernels = 0, batches = 0;
  std::map<int, std::vector<std::pair<double, double>>> batch_spans;  // tid -> [start, end)
  for (const json& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "b") ++begins;
    if (ph == "e") ++ends;
    if (ph != "X") continue;
    if (e["cat"] == "batch") {
      ++batches;
      requests += e["args"]["requests"].get<int>();
      EXPECT_EQ(e["args"]["model"], "relu");
      batch_spans[e["tid"].get<int>()].push_back(
          {e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
    }
  }
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || e["cat"] == "batch") continue;
    ++kernels;
    EXPECT_EQ(e["args"]["model"], "relu");
    EXPECT_FALSE(e["args"]["kernel"].get<std::string>().empty());
    // Each kernel slice lies inside a batch slice of its thread.
    bool inside = false;
    for (const auto& [a, b] : batch_spans[e["tid"].get<int>()])
      inside |=
          e["ts"].get<double>() >= a - 1 && e["ts"].get<double>() + e["dur"].get<double>() <= b + 1;
    EXPECT_TRUE(inside) << e.dump();
  }
  EXPECT_EQ(requests, 20);  // the traced ones, no more
  EXPECT_EQ(begins, 20);
  EXPECT_EQ(ends, 20);
  EXPECT_GE(kernels, batches);
  EXPECT_GT(batches, 0);
  EXPECT_EQ(trace["otherData"]["batches"], batches);
}

TEST(ServerTest, ModelControlIsOffWithoutARepository) {
  auto session = ReluPlusOne();
  auto server = Server::Start({{"relu", "1", session}}, Options());
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE((*server)->WaitReady().ok());
  const int port = (*server)->http_port();
  EXPECT_EQ(Send(port, http::verb::post, "/v2/repository/models/relu/unload").status, 400);
  EXPECT_EQ((*server)->UnloadModel("relu").code(), StatusCode::kUnsupported);
  EXPECT_EQ(Send(port, http::verb::get, "/v2/models/relu/ready").status, 200);
}

TEST(ServerTest, BadRequestsAreAnsweredAndTheServerStaysUp) {
  auto session = ReluPlusOne();
  ASSERT_NE(session, nullptr);
  ServerOptions o = Options();
  o.max_body_bytes = 1000;
  o.max_header_bytes = 2000;
  auto server = Server::Start({{"relu", "1", session}}, o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->http_port();
  Reply r = Send(port, http::verb::post, "/v2/models/nope/infer", "{}");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("unknown model 'nope'"), std::string::npos) << r.body;
  EXPECT_EQ(Send(port, http::verb::get, "/v2/nowhere").status, 404);
  EXPECT_EQ(Send(port, http::verb::get, "/v2/models/relu/infer").status, 405);
  r = Send(port, http::verb::post, "/v2/models/relu/infer", "{not json");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("not valid JSON"), std::string::npos) << r.body;
  // Wrong shape and wrong dtype: 400 naming the input.
  json bad = {
      {"inputs",
       {{{"name", "x"}, {"shape", {1, 5}}, {"datatype", "FP32"}, {"data", {1, 2, 3, 4, 5}}}}}};
  r = Send(port, http::verb::post, "/v2/models/relu/infer", bad.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("input 'x': expected float32[N,4]"), std::string::npos) << r.body;
  bad["inputs"][0]["shape"] = {1, 4};
  bad["inputs"][0]["datatype"] = "INT32";
  bad["inputs"][0]["data"] = {1, 2, 3, 4};
  r = Send(port, http::verb::post, "/v2/models/relu/infer", bad.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("input 'x'"), std::string::npos) << r.body;
  // A body over the limit: 413 from its Content-Length.
  r = Send(port, http::verb::post, "/v2/models/relu/infer", std::string(5000, ' '));
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(r.body.find("the limit is 1000"), std::string::npos) << r.body;
  // A header over the limit: 431.
  r = Send(port, http::verb::get, "/v2/health/live", "", {{"X-Padding", std::string(4000, 'a')}});
  EXPECT_EQ(r.status, 431);
  // Still serving.
  json good = {
      {"inputs",
       {{{"name", "x"}, {"shape", {1, 4}}, {"datatype", "FP32"}, {"data", {1, 2, 3, 4}}}}}};
  EXPECT_EQ(Send(port, http::verb::post, "/v2/models/relu/infer", good.dump()).status, 200);
  const std::string metrics = (*server)->MetricsText();
  EXPECT_NE(metrics.find("kiln_requests_total{model=\"relu\",outcome=\"invalid_argument\","
                         "protocol=\"http\"} 3"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("outcome=\"success\",protocol=\"http\"} 1"), std::string::npos);

  // Binary bodies (read straight into an aligned buffer when the header is a number within the
  // body): bad JSON, binary data longer than the body, a header past the body's end or not a
  // number: 400 naming what is wrong.
  const std::string head = json{{"inputs",
                                 {{{"name", "x"},
                                   {"shape", {1, 4}},
                                   {"datatype", "FP32"},
                                   {"parameters", {{"binary_data_size", 16}}}}}}}
                               .dump();
  const std::string eight(8, '\0');
  struct BinaryCase {
    std::string body, json_length;
    const char* expect;
  };
  for (const BinaryCase& c :
       {BinaryCase{"{not json" + eight, "9", "not valid JSON"},
        BinaryCase{head + eight, std::to_string(head.size()), "the body ends 8 bytes before"},
        BinaryCase{head + eight, std::to_string(head.size() + 100), "Inference-Header-Content"},
        BinaryCase{head + eight, "12x", "is not a number: 12x"}}) {
    r = Send(port, http::verb::post, "/v2/models/relu/infer", c.body,
             {{"Inference-Header-Content-Length", c.json_length}});
    EXPECT_EQ(r.status, 400) << c.expect;
    EXPECT_NE(r.body.find(c.expect), std::string::npos) << r.body;
  }
  // A body that stops before its Content-Length: the connection is closed unanswered.
  {
    net::io_context ioc;
    tcp::socket sock(ioc);
    sock.connect(
        tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
    const std::string partial =
        "POST /v2/models/relu/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n"
        "Inference-Header-Content-Length: 10\r\n\r\n0123456789";
    net::write(sock, net::buffer(partial));
    sock.shutdown(tcp::socket::shutdown_send);
    std::array<char, 256> answer;
    beast::error_code ec;
    const size_t n = sock.read_some(net::buffer(answer), ec);
    EXPECT_EQ(n, 0u);
    EXPECT_EQ(ec, net::error::eof);
  }
  // Binary and still serving.
  std::string ok = head;
  for (float v : {-1.f, 0.f, 2.f, 5.f}) ok.append(reinterpret_cast<const char*>(&v), sizeof v);
  r = Send(port, http::verb::post, "/v2/models/relu/infer", ok,
           {{"Inference-Header-Content-Length", std::to_string(head.size())}});
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST(ServerTest, AFullQueueAnswers503WithRetryAfter) {
  auto session = Slow();
  ASSERT_NE(session, nullptr);
  ServerOptions o = Options();
  o.batch.max_batch = 1;
  o.batch.max_queue = 1;
  auto server = Server::Start({{"slow", "1", session}}, o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE((*server)->WaitReady().ok());
  const int port = (*server)->http_port();
  // Three requests at once: one runs, one waits, the queue (1) is full for the third.
  std::vector<Reply> replies(3);
  std::vector<std::thread> clients;
  for (int i = 0; i < 3; ++i) {
    clients.emplace_back([&, i] {
      std::this_thread::sleep_for(std::chrono::milliseconds(10 * i));
      replies[i] = SendSlow(port);
    });
  }
  for (auto& t : clients) t.join();
  int ok = 0, full = 0;
  for (const Reply& r : replies) {
    if (r.status == 200) ++ok;
    if (r.status == 503) {
      ++full;
      EXPECT_EQ(r.headers.count("Retry-After") ? r.headers.at("Retry-After") : "", "1");
      EXPECT_NE(r.body.find("queue is full"), std::string::npos) << r.body;
    }
  }
  EXPECT_EQ(ok, 2);
  EXPECT_EQ(full, 1);
}

// Two instances: two batches in flight, each batcher with its own queue of one; the four
// requests that one instance would half refuse (see above) are all answered.
TEST(ServerTest, InstancesRunBatchesSideBySide) {
  auto session = Slow();
  ASSERT_NE(session, nullptr);
  ServerOptions o = Options();
  o.batch.max_batch = 1;
  o.batch.max_queue = 1;
  o.instances = 2;
  auto server = Server::Start({{"slow", "1", session}}, o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE((*server)->WaitReady().ok());
  const int port = (*server)->http_port();
  EXPECT_EQ(
      json::parse(
          Send(port, http::verb::get, "/v2/models/slow/config").body)["instance_group"][0]["count"],
      2);
  std::vector<Reply> replies(4);
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i)
    clients.emplace_back([&, i] {
      std::this_thread::sleep_for(std::chrono::milliseconds(10 * i));
      replies[i] = SendSlow(port);
    });
  for (auto& t : clients) t.join();
  for (const Reply& r : replies) EXPECT_EQ(r.status, 200) << r.body;
  const json stats = json::parse(Send(port, http::verb::get, "/v2/models/slow/stats").body);
  EXPECT_EQ(stats["model_stats"][0]["execution_count"], 4);
}

TEST(ServerTest, QueueTimeoutDropsWaitingRequestsWith504) {
  auto session = Slow();
  ASSERT_NE(session, nullptr);
  ServerOptions o = Options();
  o.batch.max_batch = 1;
  o.queue_timeout_us = 20000;  // a run takes far longer than 20 ms: the second request expires
  auto server = Server::Start({{"slow", "1", session}}, o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE((*server)->WaitReady().ok());
  const int port = (*server)->http_port();
  std::vector<Reply> replies(2);
  std::thread first([&] { replies[0] = SendSlow(port); });
  // The second request goes once the first is admitted (a fixed 10 ms wait let the second go
  // first on a loaded machine, which then ran it and expired the first).
  for (int i = 0; i < 5000; ++i) {
    if ((*server)->MetricsText().find("kiln_inflight_requests 1") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  replies[1] = SendSlow(port);
  first.join();
  EXPECT_EQ(replies[0].status, 200) << replies[0].body;
  EXPECT_EQ(replies[1].status, 504) << replies[1].body;
  EXPECT_NE(replies[1].body.find("deadline passed while it waited"), std::string::npos)
      << replies[1].body;
  EXPECT_NE((*server)->MetricsText().find("outcome=\"deadline_exceeded\""), std::string::npos);
}

TEST(ServerTest, DrainFinishesAcceptedRequestsAndRefusesNewOnes) {
  auto session = Slow();
  ASSERT_NE(session, nullptr);
  ServerOptions o = Options();
  o.batch.max_batch = 1;  // one at a time: the last finishes well after the drain begins
  auto server = Server::Start({{"slow", "1", session}}, o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE((*server)->WaitReady().ok());
  const int port = (*server)->http_port();
  std::vector<Reply> replies(4);
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i) clients.emplace_back([&, i] { replies[i] = SendSlow(port); });
  // Wait until all four are admitted.
  for (int i = 0; i < 2000 && Metric((*server)->MetricsText(), "kiln_inflight_requests") < 4; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(Metric((*server)->MetricsText(), "kiln_inflight_requests"), 4);
  DrainReport report;
  std::thread drainer([&] { report = (*server)->Drain(); });
  while (!(Send(port, http::verb::get, "/v2/health/ready").status == 503))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(Send(port, http::verb::get, "/v2/health/live").status, 200);
  const Reply refused = SendSlow(port);
  EXPECT_EQ(refused.status, 503);
  EXPECT_NE(refused.body.find("shutting down"), std::string::npos) << refused.body;
  drainer.join();
  for (auto& t : clients) t.join();
  for (const Reply& r : replies) EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_GE(report.in_flight_at_start, 1u);
  EXPECT_EQ(report.unfinished, 0u);
}

TEST(ServerTest, StartRefusesWhatCannotWork) {
  auto session = ReluPlusOne();
  EXPECT_EQ(Server::Start({}, Options()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Server::Start({{"a", "1", session}, {"a", "1", session}}, Options()).status().code(),
            StatusCode::kInvalidArgument);
  ServerOptions no_instances = Options();
  no_instances.instances = 0;
  EXPECT_EQ(Server::Start({{"a", "1", session}}, no_instances).status().code(),
            StatusCode::kInvalidArgument);
  ServerOptions bad_host = Options();
  bad_host.host = "not-an-address";
  EXPECT_EQ(Server::Start({{"a", "1", session}}, bad_host).status().code(),
            StatusCode::kInvalidArgument);
  // A taken port.
  auto first = Server::Start({{"a", "1", session}}, Options());
  ASSERT_TRUE(first.ok());
  ServerOptions same = Options();
  same.http_port = (*first)->http_port();
  auto second = Server::Start({{"a", "1", session}}, same);
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace kiln
