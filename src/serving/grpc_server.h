// KServe v2 over gRPC (inference.GRPCInferenceService, kserve_v2.proto) with Debian's libgrpc++,
// on gRPC's callback API: a ModelInfer call holds no thread while its batch waits and runs; the
// batcher's callback fills the response and finishes the call. Inputs arrive in
// raw_input_contents (or typed contents), outputs always leave in raw_output_contents.
//
// Thread-safety: gRPC's threads call in; the ModelServer must outlive the front end.
#pragma once

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
  // Stops listening; calls still running are cancelled after a short grace period.
  void Shutdown();

 private:
  struct Impl;
  explicit GrpcFrontend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::serving
