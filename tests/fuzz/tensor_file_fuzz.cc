// libFuzzer target for the tensor files kiln reads from users (`kiln run --input`, `kiln quantize
// --calibrate`, `kiln bench --input`): .npy (core/npy.cc) and ONNX TensorProto .pb
// (onnx/tensor_proto.cc). The first byte picks the format (even: .npy, odd: .pb); the rest is the
// file. A parse either fails with a Status or gives a tensor whose bytes all exist (they are read
// here), and nothing may crash, leak, or allocate beyond what the file could hold (fuzz.sh runs
// this with -malloc_limit_mb).
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/npy.h"
#include "onnx/tensor_proto.h"

namespace {

// Reads every byte so ASan sees a tensor that claims more than it holds.
unsigned Touch(const kiln::Tensor& t) {
  const auto* p = static_cast<const unsigned char*>(t.raw());
  unsigned sum = 0;
  for (size_t i = 0; p != nullptr && i < t.bytes(); ++i) sum += p[i];
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  volatile unsigned sink = 0;
  if ((data[0] & 1) == 0) {
    auto t = kiln::ParseNpy(bytes);
    if (t.ok()) sink = Touch(*t);
  } else {
    std::string name;
    auto t = kiln::onnxio::ParseTensorProto(bytes, &name);
    if (t.ok()) sink = Touch(*t);
  }
  (void)sink;
  return 0;
}
