// KServe v2 over gRPC (inference.GRPCInferenceService, kserve_v2.proto) with Debian's libgrpc++,
// on gRPC's callback API: a ModelInfer call holds no thread while its batch waits and runs; the
// batcher's callback fills the response and finishes the call. Inputs arrive in
// raw_input_contents (or typed contents), outputs always leave in raw_output_contents. Triton's
// repository methods (RepositoryIndex, RepositoryModelLoad/Unload) go to ModelServer's
// RepositoryIndex and Control, as the HTTP routes do.
//
// Thread-safety: gRPC's threads call in; Drain and Shutdown may be called from any thread (the
// first to run stops the server, the other then returns at once); the ModelServer must outlive
// the front end.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "kiln/status.h"
#include "serving/model_server.h"

namespace kiln::serving {

class GrpcFrontend {
 public:
  // Listens on host:port (0: any free port); messages up to max_message_bytes both ways.
  static StatusOr<std::unique_ptr<GrpcFrontend>> Start(ModelServer* core, const std::string& host,
                                                       int port, size_t max_message_bytes);
  ~GrpcFrontend();  // Shutdown()
  int port() const;
  // The end of a drain, once ModelServer::Drain has seen nothing admitted left (new inference
  // calls are being refused UNAVAILABLE). Every answer from now is held back until none has been
  // sent or held for kQuietMs (at most kHoldMaxMs, and not past `until`): a client in a closed
  // loop is then waiting for its answer, not sending. Then the gRPC server stops: GOAWAY on every
  // connection and the port closed (a new connection is refused); the held answers follow the
  // GOAWAY on their connections, so a client's next call opens a new connection, which is
  // refused, instead of arriving after the stop (gRPC would cancel it unseen: RST_STREAM). A
  // model load or unload still running gets until `until`; then the answers get a second to leave
  // and the connections to close, and what is left is cancelled. Returns once stopped.
  void Drain(std::chrono::steady_clock::time_point until);
  static constexpr int kQuietMs = 100;
  static constexpr int kHoldMaxMs = 1000;
  // Stops at once if Drain has not: calls still running are cancelled after 5 s.
  void Shutdown();

 private:
  struct Impl;
  explicit GrpcFrontend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::serving
