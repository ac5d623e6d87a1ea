// `kiln serve` as a library: the Open Inference Protocol (KServe v2) over HTTP/REST, in front of
// one DynamicBatcher per model, with Prometheus metrics and a drain on shutdown.
//
// The same over gRPC (inference.GRPCInferenceService) when grpc_port is set: inputs in
// raw_input_contents, outputs always in raw_output_contents; model control through Triton's
// RepositoryIndex and RepositoryModelLoad/Unload.
// HTTP endpoints (https://kserve.github.io/website/latest/modelserving/data_plane/v2_protocol/):
//   GET  /v2/health/live, /v2/health/ready, /v2, /v2/models/{m}[/versions/{v}][/ready]
//   POST /v2/models/{m}[/versions/{v}]/infer   JSON tensors, or the binary tensor data extension
//   GET  /v2/models/{m}/config, /v2/models/{m}/stats   (Triton's, which perf_analyzer reads)
//   GET  /metrics                              Prometheus text (names in docs/serving.md)
//   GET|POST /v2/repository/index               served models, and unloaded ones (UNAVAILABLE)
//   POST /v2/repository/models/{m}/load|unload  model control (ServerOptions::repository)
// The server is asynchronous (Boost.Beast over Asio): a connection waiting for its batch holds no
// thread, so the batch size is bounded by the batcher's policy, not by a thread pool.
//
// Lifecycle: Start() binds the ports and answers at once (live); the models are warmed (Session::
// Prepare at every batch size up to max_batch) on a background thread, and the server is ready
// only after that. Drain() makes it not ready, answers new inference requests with 503 (HTTP
// answers then close their connection), lets the accepted ones finish, then closes the HTTP
// listener (new connections are refused) and gives accepted connections up to a second to be
// answered; it returns then (or at the drain timeout). gRPC answers UNAVAILABLE meanwhile, and
// stops alongside (GOAWAY, its port closed) once its last answers have gone (GrpcFrontend::Drain
// in src/serving/grpc_server.h).
//
// Ownership: the Server shares the Sessions. Thread-safety: every method may be called from any
// thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/batcher.h"
#include "kiln/session.h"
#include "kiln/status.h"

namespace kiln {

struct ServedModel {
  std::string name;
  std::string version = "1";
  std::shared_ptr<const Session> session;
};

struct ServerOptions {
  std::string host = "0.0.0.0";
  int http_port = 8000;  // 0: any free port (http_port() says which)
  int grpc_port = -1;    // inference.GRPCInferenceService; -1: none, 0: any free port
  // Per model. A model whose inputs have no symbolic first dimension is served unbatched
  // (max_batch_size 0 in its config): one request per run.
  BatchPolicy batch;
  // Batchers per model over its one session: this many batches in flight at once (give each
  // fewer compute threads: SessionOptions::num_threads = cores / instances).
  int instances = 1;
  int http_threads = 2;                 // Asio threads: parsing and answering, not compute
  size_t max_body_bytes = 64u << 20;    // larger bodies get 413, decided from Content-Length
  size_t max_header_bytes = 16u << 10;  // larger headers get 431
  int max_connections = 1024;           // more get 503 and are closed
  int64_t idle_timeout_ms = 60000;      // a connection silent this long is closed
  int64_t drain_timeout_ms = 30000;     // Drain() waits at most this long
  // A request still queued this long after it arrived is dropped (504 / DEADLINE_EXCEEDED)
  // unless it names its own timeout (Triton's "timeout" parameter); 0: no default.
  int64_t queue_timeout_us = 0;
  bool warm_up = true;  // Prepare every batch size before ready
  // Model control (Triton's explicit mode; POST /v2/repository/models/{m}/load and unload, and
  // Server::LoadModel/UnloadModel): makes the model of that name, with its session; NotFound
  // when the repository has none. Null: model control is off (load and unload are refused).
  std::function<StatusOr<ServedModel>(const std::string& name)> repository;
};

// What Server::Drain() saw.
struct DrainReport {
  uint64_t in_flight_at_start = 0;  // accepted requests not yet answered when the drain began
  uint64_t unfinished = 0;          // still unanswered at the timeout (0: a clean drain)
  double elapsed_ms = 0;
};

class Server {
 public:
  // Binds the port and starts answering (live, not yet ready). InvalidArgument for no models, a
  // duplicate name or a bad policy; Unavailable when the port cannot be bound.
  static StatusOr<std::unique_ptr<Server>> Start(std::vector<ServedModel> models,
                                                 ServerOptions options);
  // Drains (if not done yet), then stops every thread.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int http_port() const;
  int grpc_port() const;  // -1 when not serving gRPC
  bool ready() const;
  // Blocks until the warm-up has finished; its Status (the first failure, if any).
  Status WaitReady() const;
  DrainReport Drain();
  // The Prometheus text that GET /metrics answers.
  std::string MetricsText() const;
  // Model control (ServerOptions::repository): LoadModel loads `name`, warms it and serves it,
  // replacing a served model of that name only once the new one is ready; UnloadModel stops
  // serving it (new requests: 404; the queued ones are answered; its memory goes with the last
  // request and session). Both block until done, one at a time.
  Status LoadModel(const std::string& name);
  Status UnloadModel(const std::string& name);
  // Tracing: from StartTrace, every batch (at most 10,000) is kept with per-kernel timings of
  // its run; StopTrace ends it and returns Chrome/Perfetto trace JSON (ui.perfetto.dev): a slice
  // per batch on its batcher thread (model, samples, requests) holding a slice per kernel, and
  // each request's wait in the queue as an async slice. `kiln serve --trace FILE`.
  void StartTrace();
  std::string StopTrace();

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
