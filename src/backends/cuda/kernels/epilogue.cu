// In-place epilogues after cuDNN convolution / cuBLAS GEMM (epilogue_math.h): bias per channel or
// per column, optional residual, then the activation. One thread per element, grid-stride loop.
// y (and the residual) float or Half storage, bias float32, computed in float32; y dense
// row-major; declared in launch.h.
#include <cuda_runtime.h>

#include "backends/cuda/kernels/epilogue_math.h"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/launch.h"

namespace kiln::cuda_kernels {
namespace {

cuda_math::EpilogueParams Params(int activation, float alpha, float beta) {
  return {static_cast<cuda_math::Activation>(activation), alpha, beta};
}

}  // namespace

template <typename T>
__global__ void ConvEpilogueKernel(T* __restrict__ y, const float* __restrict__ bias,
                                   const T* __restrict__ residual, int64_t n, int64_t channels,
                                   int64_t hw, cuda_math::EpilogueParams p) {
  for (int64_t i = GridStart(); i < n; i += GridStep())
    cuda_math::Store(&y[i], cuda_math::ConvEpilogueAt(cuda_math::ToFloat(y[i]), bias, residual, i,
                                                      cuda_math::ChannelOf(i, channels, hw), p));
}

template <typename T>
__global__ void RowBiasEpilogueKernel(T* __restrict__ y, const float* __restrict__ bias, int64_t n,
                                      int64_t cols, cuda_math::EpilogueParams p) {
  for (int64_t i = GridStart(); i < n; i += GridStep())
    cuda_math::Store(&y[i],
                     cuda_math::RowBiasEpilogueAt(cuda_math::ToFloat(y[i]), bias, i, cols, p));
}

template <typename T>
cudaError_t LaunchConvEpilogue(T* y, const float* bias, const T* residual, int64_t batch,
                               int64_t channels, int64_t hw, int activation, float alpha,
                               float beta, cudaStream_t stream) {
  const int64_t n = batch * channels * hw;
  if (n <= 0) return cudaSuccess;
  ConvEpilogueKernel<T><<<GridFor(n), kThreads, 0, stream>>>(y, bias, residual, n, channels, hw,
                                                             Params(activation, alpha, beta));
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchRowBiasEpilogue(T* y, const float* bias, int64_t rows, int64_t cols,
                                  int activation, float alpha, float beta, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  RowBiasEpilogueKernel<T>
      <<<GridFor(n), kThreads, 0, stream>>>(y, bias, n, cols, Params(activation, alpha, beta));
  return cudaGetLastError();
}

#define KILN_INSTANTIATE(T)                                                                     \
  template cudaError_t LaunchConvEpilogue<T>(T*, const float*, const T*, int64_t, int64_t,      \
                                             int64_t, int, float, float, cudaStream_t);         \
  template cudaError_t LaunchRowBiasEpilogue<T>(T*, const float*, int64_t, int64_t, int, float, \
                                                float, cudaStream_t);
KILN_FLOAT_STORAGE(KILN_INSTANTIATE)

KILN_CUDA_MODULE(ConvEpilogueKernel<float>);

}  // namespace kiln::cuda_kernels
