// The Open Inference Protocol (KServe v2) as data: datatype names, the HTTP infer request (JSON
// tensors and the binary tensor data extension) parsed into tensors, the response built from
// tensors, and the JSON documents the metadata, config and statistics endpoints answer. Pure
// functions over strings, shared by the HTTP and gRPC front ends and tested without a socket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/batcher.h"
#include "kiln/session.h"
#include "kiln/status.h"

namespace kiln::serving {

// "FP32", "INT64", ... ; "" for a type the protocol cannot carry.
const char* KServeDatatype(DataType t);
// The inverse; kUndefined for an unknown name (BYTES included: kiln has no string tensors).
DataType FromKServeDatatype(std::string_view name);
// Triton's model-config names: "TYPE_FP32", ...
std::string TritonConfigType(DataType t);

struct RequestedOutput {
  std::string name;
  bool binary = false;
};

struct InferRequest {
  std::string id;
  std::vector<NamedTensor> inputs;
  std::vector<RequestedOutput> outputs;  // empty: every output, binary per binary_data_output
  bool binary_data_output = false;
  int64_t timeout_us = 0;  // parameters.timeout (Triton's), 0: none
  int priority = 0;        // parameters.priority
};

// Parses an HTTP infer body. `json_length` is Inference-Header-Content-Length when present: the
// first json_length bytes are the JSON, the rest the binary tensors of the inputs that name a
// binary_data_size, in order. InvalidArgument naming the input and the rule on any mismatch.
// With `owner` (which keeps `body` alive), a binary tensor that starts on a 64-byte boundary of
// the body is used where it lies, sharing `owner`, instead of being copied.
StatusOr<InferRequest> ParseHttpInferRequest(std::string_view body,
                                             std::optional<size_t> json_length,
                                             std::shared_ptr<void> owner = nullptr);

// The outputs a request asked for, in its order (every output, in the model's order, when it
// names none), each with whether it goes as binary; InvalidArgument naming an unknown one.
struct SelectedOutput {
  RequestedOutput request;
  const Tensor* tensor = nullptr;
};
StatusOr<std::vector<SelectedOutput>> SelectOutputs(const std::string& model,
                                                    const InferRequest& request,
                                                    const std::vector<NamedTensor>& outputs);

struct HttpInferResponse {
  std::string body;
  std::optional<size_t> json_length;  // set when binary outputs follow the JSON
};

// Selects the requested outputs (NotFound-style InvalidArgument for an unknown one) and writes
// them as JSON data or as binary after the JSON.
StatusOr<HttpInferResponse> BuildHttpInferResponse(const std::string& model,
                                                   const std::string& version,
                                                   const InferRequest& request,
                                                   std::vector<NamedTensor> outputs);

// Client side: an infer request body (binary: tensors after the JSON, `json_length` set; without
// `append_tensors` only the JSON, the caller sending the tensors' bytes after it), the outputs of
// a response, and the inputs a model-metadata document declares.
std::string BuildHttpInferRequestBody(const std::vector<NamedTensor>& inputs, bool binary,
                                      std::optional<size_t>* json_length,
                                      bool append_tensors = true);
StatusOr<std::vector<NamedTensor>> ParseHttpInferResponse(std::string_view body,
                                                          std::optional<size_t> json_length);
StatusOr<std::vector<TensorSpec>> ParseModelMetadataInputs(std::string_view body);

// {"error": message}.
std::string ErrorJson(const std::string& message);

// What the metadata, config and statistics documents need of one served model.
struct ModelDescription {
  std::string name;
  std::string version;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  int max_batch_size = 0;  // 0: unbatched (dims then include the first dimension)
  int instances = 1;       // batchers (batches in flight) over the model's session
  BatchPolicy policy;
};

// Per-model counters for Triton's statistics document (nanoseconds, counts).
struct ModelCounters {
  uint64_t success_count = 0, success_ns = 0;
  uint64_t fail_count = 0, fail_ns = 0;
  uint64_t queue_count = 0, queue_ns = 0;
  uint64_t compute_count = 0, compute_ns = 0;
  uint64_t inference_count = 0;  // samples
  uint64_t execution_count = 0;  // batches
  uint64_t last_inference_ms = 0;
  std::map<int, std::pair<uint64_t, uint64_t>> batch_stats;  // size -> (count, compute ns)
};

// Triton's repository API: a load request's parameter that kiln does not take ("config",
// "file:..."): Unsupported, naming it; OK for any other (tritonclient sends unload_dependents,
// which means nothing without ensembles).
Status CheckLoadParameter(const std::string& key);
// The body of `POST v2/repository/models/{m}/load|unload`: empty, or a JSON object whose
// "parameters", if present, is an object passing CheckLoadParameter key by key. InvalidArgument
// for a body that is not such an object, Unsupported (CheckLoadParameter's) for a refused key.
Status CheckLoadRequestBody(std::string_view body);

std::string ServerMetadataJson();
std::string ModelMetadataJson(const ModelDescription& m);
std::string ModelConfigJson(const ModelDescription& m);
std::string ModelStatsJson(const std::vector<std::pair<ModelDescription, ModelCounters>>& models);

}  // namespace kiln::serving
