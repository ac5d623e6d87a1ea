// libFuzzer target for kiln serve's request parsing (src/serving/kserve.cc): the bytes are an HTTP
// infer body; the first two (little-endian) give Inference-Header-Content-Length (0xFFFF: absent).
// A request that parses is answered with its inputs as outputs (binary or JSON); the same bytes
// are also parsed as a response, as the client would. Nothing may crash, leak, or allocate beyond
// what the body could hold.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "serving/kserve.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const unsigned header = data[0] | (data[1] << 8);
  const std::string_view body(reinterpret_cast<const char*>(data + 2), size - 2);
  std::optional<size_t> json_length;
  if (header != 0xFFFF) json_length = header;
  auto request = kiln::serving::ParseHttpInferRequest(body, json_length);
  if (request.ok()) {
    kiln::serving::InferRequest answer;
    answer.binary_data_output = (header & 1) != 0;
    (void)kiln::serving::BuildHttpInferResponse("m", "1", answer, request->inputs);
  }
  (void)kiln::serving::ParseHttpInferResponse(body, json_length);
  (void)kiln::serving::ParseModelMetadataInputs(body);
  return 0;
}
