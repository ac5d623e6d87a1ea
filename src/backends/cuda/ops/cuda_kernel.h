// Helpers shared by the CUDA backend's kernels (src/backends/cuda/ops/*.cc): the launch-error
// check, the float32-only support test and the fp16 weight upload. Activations are kiln's one
// type (ops/activation_math.h), passed to launchers as int. Kernels run on ComputeContext::stream
// with device pointers.
#pragma once

#include <cuda_runtime_api.h>

#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels/activation_math.h"
#include "backends/cuda/kernels/cast.h"
#include "backends/cuda/kernels/cast_math.h"
#include "backends/cuda/kernels/launch.h"
#include "ops/tensor/cast.h"
#include "runtime/half_values.h"
#include "runtime/kernel.h"

namespace kiln::cuda {

inline cudaStream_t StreamOf(const ir::ComputeContext& ctx) {
  return static_cast<cudaStream_t>(ctx.stream);
}

// A failed kernel launch as a Status naming the node and the kernel.
inline Status CheckLaunch(cudaError_t e, const char* kernel, const ir::Node& node) {
  if (e == cudaSuccess) return OkStatus();
  return DeviceError(std::string("launching ") + kernel + " for " + node.Describe() +
                     " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

inline bool AllFloat(const std::vector<runtime::TensorInfo>& in) {
  for (const auto& t : in)
    if (t.dtype != DataType::kUndefined && t.dtype != DataType::kFloat) return false;
  return true;
}

// Float16 between kernels (runtime/half_values.h): a kernel whose KernelDef lists `data` in
// half_inputs takes those inputs all float32 or all float16 (its outputs following them), every
// other input float32 (omitted ones aside).
inline bool FloatOrHalf(const std::vector<runtime::TensorInfo>& in,
                        std::initializer_list<int> data) {
  DataType storage = DataType::kUndefined;
  for (size_t i = 0; i < in.size(); ++i) {
    const DataType t = in[i].dtype;
    if (t == DataType::kUndefined) continue;
    if (!runtime::IsHalfInput(data, i)) {
      if (t != DataType::kFloat) return false;
      continue;
    }
    if (t != DataType::kFloat && t != DataType::kFloat16) return false;
    if (storage != DataType::kUndefined && t != storage) return false;
    storage = t;
  }
  return true;
}

// Calls f(T{}) with T the device storage of float activations of `dtype`: cuda_math::Half for
// float16, float otherwise; returns what f returns.
template <typename F>
auto WithStorage(DataType dtype, F&& f) {
  if (dtype == DataType::kFloat16) return f(cuda_math::Half{});
  return f(float{});
}
template <typename T>
const T* InAs(const ir::ComputeContext& ctx, size_t i) {
  return static_cast<const T*>(ctx.in(i).raw());
}
template <typename T>
T* OutAs(const ir::ComputeContext& ctx, size_t i) {
  return static_cast<T*>(ctx.out(i).raw());
}

// A constant float32 tensor converted to float16 on the host (cast_math.h) and uploaded once:
// the prepacked weights of --precision fp16.
inline StatusOr<std::shared_ptr<void>> UploadHalf(runtime::Device* device, const Tensor& t) {
  std::vector<uint16_t> half(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < half.size(); ++i) half[i] = cuda_math::FloatToHalf(t.data<float>()[i]);
  KILN_ASSIGN_OR_RETURN(auto mem, device->Allocate(half.size() * sizeof(uint16_t)));
  KILN_RETURN_IF_ERROR(device->CopyToDevice(mem.get(), half.data(), half.size() * 2));
  return mem;
}

constexpr size_t AlignScratch(size_t n) { return (n + 255) / 256 * 256; }

// Workspace limit for a cuDNN algorithm (from the arena's scratch).
constexpr size_t kMaxCudnnWorkspaceBytes = size_t{256} << 20;

// The first of cuDNN's `returned` candidates (best first) that ran and whose workspace, from
// `workspace(algo, &bytes)` (a cudnnGet*WorkspaceSize call), fits the limit: sets *algo and *bytes.
// Unsupported when none does.
template <typename Perf, typename Algo, typename WorkspaceFn>
Status PickCudnnAlgo(const Perf* perf, int returned, WorkspaceFn workspace, Algo* algo,
                     size_t* bytes) {
  for (int k = 0; k < returned; ++k) {
    size_t b = 0;
    if (perf[k].status != CUDNN_STATUS_SUCCESS ||
        workspace(perf[k].algo, &b) != CUDNN_STATUS_SUCCESS || b > kMaxCudnnWorkspaceBytes)
      continue;
    *algo = perf[k].algo;
    *bytes = b;
    return OkStatus();
  }
  return Unsupported("cuDNN returned no usable algorithm (" + std::to_string(returned) +
                     " candidates, workspace limit " +
                     std::to_string(kMaxCudnnWorkspaceBytes >> 20) + " MiB)");
}

// Product of dims [from, to).
inline int64_t Product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t d = from; d < to; ++d) p *= s[d];
  return p;
}

inline int64_t NormalizeAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

// KernelDef::create: kernels are constructed from the node, and from the op (whose typed
// attributes, declared in the op's header under ops/, they copy) when they take one.
template <typename K>
std::unique_ptr<runtime::Kernel> Make(const ir::Node& node, const ir::Op& op) {
  if constexpr (std::is_constructible_v<K, const ir::Node&, const ir::Op&>)
    return std::make_unique<K>(node, op);
  else
    return std::make_unique<K>(node);
}

}  // namespace kiln::cuda
