// In-place epilogues after cuDNN convolution / cuBLAS GEMM (epilogue_math.h): bias per channel or
// per column, optional residual, then the activation. One thread per element, grid-stride loop.
// Float32; y dense row-major; declared in launch.h.
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

__global__ void ConvEpilogueKernel(float* __restrict__ y, const float* __restrict__ bias,
                                   const float* __restrict__ residual, int64_t n, int64_t channels,
                                   int64_t hw, cuda_math::EpilogueParams p) {
  for (int64_t i = GridStart(); i < n; i += GridStep())
    y[i] = cuda_math::ConvEpilogueAt(y[i], bias, residual, i, cuda_math::ChannelOf(i, channels, hw),
                                     p);
}

__global__ void RowBiasEpilogueKernel(float* __restrict__ y, const float* __restrict__ bias,
                                      int64_t n, int64_t cols, cuda_math::EpilogueParams p) {
  for (int64_t i = GridStart(); i < n; i += GridStep())
    y[i] = cuda_math::RowBiasEpilogueAt(y[i], bias, i, cols, p);
}

cudaError_t LaunchConvEpilogue(float* y, const float* bias, const float* residual, int64_t batch,
                               int64_t channels, int64_t hw, int activation, float alpha,
                               float beta, cudaStream_t stream) {
  const int64_t n = batch * channels * hw;
  if (n <= 0) return cudaSuccess;
  ConvEpilogueKernel<<<GridFor(n), kThreads, 0, stream>>>(y, bias, residual, n, channels, hw,
                                                          Params(activation, alpha, beta));
  return cudaGetLastError();
}

cudaError_t LaunchRowBiasEpilogue(float* y, const float* bias, int64_t rows, int64_t cols,
                                  int activation, float alpha, float beta, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  RowBiasEpilogueKernel<<<GridFor(n), kThreads, 0, stream>>>(y, bias, n, cols,
                                                             Params(activation, alpha, beta));
  return cudaGetLastError();
}

KILN_CUDA_MODULE(ConvEpilogueKernel);

}  // namespace kiln::cuda_kernels
