// Launch wrappers of kiln's own CUDA kernels (src/backends/cuda/kernels/*.cu), for the CUDA
// backend. Plain C++: it includes only <cuda_runtime_api.h> and the *_math.h headers that define
// the by-value parameter structs, so host code compiled with g++ can call the launchers.
//
// Every launcher enqueues on `stream` and returns the launch's cudaError_t (cudaSuccess without
// launching for empty work); callers turn it into a Status naming the node. Tensors are float32,
// dense row-major, device pointers; sizes are int64_t. Launchers templated on T take float or
// cuda_math::Half (float16 bits, cast_math.h) storage, computing in float32 either way; both are
// instantiated (KILN_FLOAT_STORAGE). `activation` and `op` are the int values of
// cuda_math::Activation and cuda_math::BinaryOp. None of them synchronizes the host.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "backends/cuda/kernels/binary_math.h"
#include "backends/cuda/kernels/cast_math.h"
#include "backends/cuda/kernels/gather_math.h"
#include "backends/cuda/kernels/layout_math.h"
#include "backends/cuda/kernels/pool_math.h"
#include "backends/cuda/kernels/reduce_axes_math.h"
#include "backends/cuda/kernels/resize_math.h"
#include "backends/cuda/kernels/softmax_math.h"

namespace kiln::cuda_kernels {

// Each kernels/*.cu file (one CUDA module each) registers one of its kernels at load time
// (KILN_CUDA_MODULE(kernel)), so that LoadModules() can force every module to load when the
// device opens: with CUDA's lazy loading a module loads, and on a GPU without SASS for it is
// compiled from PTX, at its first launch, which would otherwise land inside the first run.
int RegisterModule(const char* file, const void* kernel);
#define KILN_CUDA_MODULE(kernel)                                   \
  [[maybe_unused]] static const int kiln_cuda_module_registered_ = \
      ::kiln::cuda_kernels::RegisterModule(__FILE__, reinterpret_cast<const void*>(&kernel))

struct ModuleLoad {
  int modules = 0;
  double ms = 0;         // wall time of loading them all
  int kernel_arch = 0;   // cudaFuncAttributes::binaryVersion (the lowest seen), e.g. 90
  bool ptx_jit = false;  // a module's binary is not one of `sass_archs`: compiled from PTX
  std::string error;     // the first failing module and its error
};
// Loads every registered module on the current device; `sass_archs` are the SASS architectures
// built in ("75-real 80-real ... 90-virtual" as CMake lists them).
ModuleLoad LoadModules(const std::string& sass_archs);

// dst[i] = Apply(activation, src[i], alpha, beta), i < n; dst may equal src (activation.cu).
template <typename T>
cudaError_t LaunchActivation(const T* src, T* dst, int64_t n, int activation, float alpha,
                             float beta, cudaStream_t stream);

// dst = op(a, b) with numpy broadcasting described by `index` (MakeBroadcastIndex) (binary.cu).
template <typename T>
cudaError_t LaunchBinary(int op, const T* a, const T* b, T* dst,
                         const cuda_math::BroadcastIndex& index, cudaStream_t stream);

// In place on y [batch, channels, hw]: y = act(y + bias[c] + residual[i]); bias (float32) and
// residual may be null (epilogue.cu).
template <typename T>
cudaError_t LaunchConvEpilogue(T* y, const float* bias, const T* residual, int64_t batch,
                               int64_t channels, int64_t hw, int activation, float alpha,
                               float beta, cudaStream_t stream);

// In place on y [rows, cols]: y = act(y + bias[col]); bias (float32) may be null (epilogue.cu).
template <typename T>
cudaError_t LaunchRowBiasEpilogue(T* y, const float* bias, int64_t rows, int64_t cols,
                                  int activation, float alpha, float beta, cudaStream_t stream);

// src [planes, in_h, in_w] -> dst [planes, out_h, out_w] (pool.cu).
template <typename T>
cudaError_t LaunchMaxPool2d(const T* src, T* dst, int64_t planes,
                            const cuda_math::Pool2dParams& params, cudaStream_t stream);
template <typename T>
cudaError_t LaunchAveragePool2d(const T* src, T* dst, int64_t planes,
                                const cuda_math::Pool2dParams& params, cudaStream_t stream);

// src [planes, plane_size] -> dst [planes]: mean or maximum of each plane (0 for an empty plane)
// (pool.cu).
template <typename T>
cudaError_t LaunchGlobalPool(const T* src, T* dst, int64_t planes, int64_t plane_size, bool max,
                             cudaStream_t stream);

// Softmax or LogSoftmax of src viewed as [outer, n, inner] along n (softmax.cu).
template <typename T>
cudaError_t LaunchSoftmax(const T* src, T* dst, const cuda_math::SoftmaxShape& shape,
                          bool log_softmax, cudaStream_t stream);

// LayerNormalization of src [rows, cols] per row; gamma [cols], beta [cols] or null, float32
// (layernorm.cu).
template <typename T>
cudaError_t LaunchLayerNorm(const T* src, T* dst, const float* gamma, const float* beta,
                            int64_t rows, int64_t cols, float epsilon, cudaStream_t stream);

// dst[o] = src[GatherOffset(index, o)]: Transpose (MakeTransposeIndex) and Slice
// (MakeSliceIndex) (layout.cu).
template <typename T>
cudaError_t LaunchStridedGather(const T* src, T* dst, const cuda_math::GatherIndex& index,
                                cudaStream_t stream);

// Constant-mode Pad (MakePadIndex) (layout.cu).
template <typename T>
cudaError_t LaunchPadConstant(const T* src, T* dst, const cuda_math::PadIndex& index,
                              cudaStream_t stream);

// One Concat input copied into its column range of the output (layout.cu).
template <typename T>
cudaError_t LaunchConcatCopy(const T* src, T* dst, const cuda_math::ConcatIndex& index,
                             cudaStream_t stream);

// ONNX Gather along one axis (MakeGatherAxisShape): dst [outer, count, inner] from src
// [outer, dim, inner] and `count` int64 device indices (negative wrap; out of range gives zero
// bytes). Elements of elem_bytes = 1, 2, 4 or 8 bytes, copied bit-for-bit (else
// cudaErrorInvalidValue) (gather.cu).
cudaError_t LaunchGatherAxis(const void* src, const int64_t* indices, void* dst,
                             const cuda_math::GatherAxisShape& shape, int64_t elem_bytes,
                             cudaStream_t stream);

// Reduce* of src over the axes described by `shape` (MakeReduceAxesShape) into dst [outputs]; `op`
// is the int value of cuda_math::ReduceOp (reduce_axes.cu).
template <typename T>
cudaError_t LaunchReduceAxes(const T* src, T* dst, const cuda_math::ReduceAxesShape& shape, int op,
                             cudaStream_t stream);

// src [planes, in_h, in_w] -> dst [planes, out_h, out_w]: 2-D nearest or bilinear Resize
// (MakeResize2dParams) (resize.cu).
template <typename T>
cudaError_t LaunchResize2d(const T* src, T* dst, int64_t planes,
                           const cuda_math::Resize2dParams& params, cudaStream_t stream);

// Instantiates a templated launcher for both storage types (in its .cu file).
#define KILN_FLOAT_STORAGE(X) X(float) X(::kiln::cuda_math::Half)

}  // namespace kiln::cuda_kernels
