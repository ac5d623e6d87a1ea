// libFuzzer target for the model loader: protobuf bytes in, Status out. Each input is parsed as
// an ONNX model (onnxio::LoadModelFromBytes: protobuf, graph structure, initializers, external
// data references confined to the model's folder) and, when that succeeds, checked node by node
// (runtime::BuildModel: op lookup by domain and opset, typed attribute parsing and validation,
// topological order). Any outcome is fine except a crash, a sanitizer report, a hang or an
// exception escaping: those are the bugs this looks for. Built by the `fuzz` preset (clang,
// -fsanitize=fuzzer,address,undefined); run by scripts/fuzz.sh over tests/fuzz/corpus.
#include <cstddef>
#include <cstdint>
#include <string>

#include "onnx/onnx_loader.h"
#include "runtime/execution_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto graph = kiln::onnxio::LoadModelFromBytes(bytes, "/nonexistent-model-dir");
  if (!graph.ok()) {
    // Every failure says something.
    if (graph.status().message().empty()) __builtin_trap();
    return 0;
  }
  auto model = kiln::runtime::BuildModel(std::move(graph).value());
  if (!model.ok() && model.status().message().empty()) __builtin_trap();
  return 0;
}
