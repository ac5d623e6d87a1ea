// Tensor files (include/kiln/tensor_io.h): .npy through core/npy, .pb through onnx/tensor_proto.
#include "kiln/tensor_io.h"

#include "core/half.h"
#include "core/npy.h"
#include "onnx/tensor_proto.h"

namespace kiln {

StatusOr<Tensor> ReadTensorFile(const std::string& path) {
  auto ends = [&](const char* ext) {
    std::string e = ext;
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends(".npy")) return ReadNpyFile(path);
  if (ends(".pb")) return onnxio::ReadTensorProtoFile(path);
  return InvalidArgument("'" + path + "': unknown tensor file type; expected .npy or .pb");
}

std::string TensorFileName(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

StatusOr<Tensor> ConvertFloatTensor(const Tensor& t, DataType to) {
  if (t.dtype() != DataType::kFloat)
    return Unsupported(std::string("ConvertFloatTensor converts float32 tensors; got ") +
                       DataTypeName(t.dtype()));
  if (to == DataType::kFloat) return t.Clone();
  if (to != DataType::kFloat16 && to != DataType::kBFloat16)
    return Unsupported(std::string("ConvertFloatTensor converts to float16 or bfloat16; got ") +
                       DataTypeName(to));
  Tensor out = Tensor::Empty(to, t.shape());
  const float* src = t.data<float>();
  auto* dst = static_cast<uint16_t*>(out.raw());
  for (int64_t i = 0; i < t.numel(); ++i)
    dst[i] = to == DataType::kBFloat16 ? FloatToBf16(src[i]) : DoubleToHalf(src[i]);
  return out;
}

}  // namespace kiln
