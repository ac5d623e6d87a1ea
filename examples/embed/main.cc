// Loads an ONNX model with an installed kiln, runs it once and prints the top class.
// usage: embed MODEL [INPUT.f32]
// INPUT.f32 holds the first input's float32 values at batch 1 (raw, native byte order); without
// it every value is 0.5. Symbolic dimensions are taken as 1.
#include <kiln/session.h>
#include <kiln/version.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

int main(int argc, char** argv) {
  if (argc < 2) return std::fprintf(stderr, "usage: %s MODEL [INPUT.f32]\n", argv[0]), 2;
  auto session = kiln::Session::Load(argv[1]);
  if (!session.ok()) return std::fprintf(stderr, "%s\n", session.status().ToString().c_str()), 1;
  const kiln::TensorSpec& spec = (*session)->inputs().at(0);
  kiln::Shape shape;
  for (int64_t d : spec.dims) shape.push_back(d < 0 ? 1 : d);
  kiln::Tensor x = kiln::Tensor::Empty(kiln::DataType::kFloat, shape);
  float* values = x.data<float>();
  std::fill(values, values + x.numel(), 0.5f);
  if (argc > 2) {
    std::ifstream file(argv[2], std::ios::binary);
    if (!file.read(reinterpret_cast<char*>(values), static_cast<std::streamsize>(x.bytes()))) {
      std::fprintf(stderr, "%s: need %zu bytes for %s\n", argv[2], x.bytes(),
                   spec.ToString().c_str());
      return 1;
    }
  }
  std::vector<kiln::NamedTensor> outputs;
  kiln::Status status = (*session)->Run({{spec.name, x}}, &outputs);
  if (!status.ok()) return std::fprintf(stderr, "%s\n", status.ToString().c_str()), 1;
  const kiln::Tensor& y = outputs.at(0).tensor;
  const float* p = y.data<float>();
  const long best = std::max_element(p, p + y.numel()) - p;
  std::printf("kiln %s (headers %s)\n%s: top class %ld (%.6f)\nvalues:", kiln::LibraryVersion(),
              KILN_VERSION_TEXT, outputs[0].name.c_str(), best, p[best]);
  for (int64_t i = 0; i < y.numel(); ++i) std::printf(" %.6g", p[i]);
  std::printf("\n");
  return 0;
}
