// A client for the Open Inference Protocol (KServe v2), the protocol `kiln serve` and NVIDIA
// Triton speak: HTTP/REST (binary tensor data extension by default, JSON tensors on request) or
// gRPC (raw contents). `kiln bench --url` drives servers with it.
//
// Ownership: each client holds one connection. Thread-safety: none; use one client per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/session.h"
#include "kiln/status.h"

namespace kiln {

struct ClientOptions {
  int64_t timeout_ms = 60000;  // per call; DeadlineExceeded beyond it
  bool json = false;           // HTTP: tensors as JSON numbers instead of binary
};

class InferenceClient {
 public:
  // "http://HOST:PORT" or "grpc://HOST:PORT". Connects lazily (the first call); InvalidArgument
  // for any other form.
  static StatusOr<std::unique_ptr<InferenceClient>> Create(const std::string& url,
                                                           ClientOptions options = {});
  virtual ~InferenceClient() = default;

  // Runs `model` on the inputs; every output comes back. A server's refusal comes back as a
  // Status: InvalidArgument (400 / INVALID_ARGUMENT), NotFound (404), Unavailable (503 /
  // UNAVAILABLE: queue full or shutting down), DeadlineExceeded (504), Internal otherwise; the
  // message is the server's.
  virtual Status Infer(const std::string& model, const std::vector<NamedTensor>& inputs,
                       std::vector<NamedTensor>* outputs) = 0;
  // The model's declared inputs (dims -1 where not fixed).
  virtual StatusOr<std::vector<TensorSpec>> ModelInputs(const std::string& model) = 0;
  // True once the server is ready (false while it warms up or drains).
  virtual StatusOr<bool> ServerReady() = 0;
};

}  // namespace kiln
