// LayerNormalization (layernorm_math.h): one block of kReduceThreads threads per row (grid-stride
// over rows): a block sum for the mean, a block sum of squared deviations for the biased
// variance, then each thread normalises its strided columns. X and Y float or Half storage, gamma
// and beta float32, computed in float32; [rows, cols] dense; declared in launch.h.
#include <cuda_runtime.h>

#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/launch.h"
#include "backends/cuda/kernels/layernorm_math.h"

namespace kiln::cuda_kernels {

template <typename T>
__global__ void LayerNormKernel(const T* __restrict__ src, T* __restrict__ dst,
                                const float* __restrict__ gamma, const float* __restrict__ beta,
                                int64_t rows, int64_t cols, float epsilon) {
  __shared__ float smem[cuda_math::kReduceThreads];
  constexpr int kT = cuda_math::kReduceThreads;
  constexpr auto kSum = cuda_math::ReduceKind::kSum;
  const int t = threadIdx.x;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = src + r * cols;
    const cuda_math::LoadRow<T> row{x, 1};
    const float mean = BlockReduce(kSum, cuda_math::ThreadPartial(kSum, row, cols, t, kT), smem) /
                       static_cast<float>(cols);
    const cuda_math::LoadSquaredDev<T> dev{x, mean};
    const float inv = cuda_math::LayerNormInvStd(
        BlockReduce(kSum, cuda_math::ThreadPartial(kSum, dev, cols, t, kT), smem), cols, epsilon);
    for (int64_t j = t; j < cols; j += kT)
      cuda_math::Store(&dst[r * cols + j], cuda_math::LayerNormOut(cuda_math::ToFloat(x[j]), mean,
                                                                   inv, gamma, beta, j));
  }
}

template <typename T>
cudaError_t LaunchLayerNorm(const T* src, T* dst, const float* gamma, const float* beta,
                            int64_t rows, int64_t cols, float epsilon, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  LayerNormKernel<T><<<GridFor(rows, 1), cuda_math::kReduceThreads, 0, stream>>>(
      src, dst, gamma, beta, rows, cols, epsilon);
  return cudaGetLastError();
}

#define KILN_INSTANTIATE(T)                                                                  \
  template cudaError_t LaunchLayerNorm<T>(const T*, T*, const float*, const float*, int64_t, \
                                          int64_t, float, cudaStream_t);
KILN_FLOAT_STORAGE(KILN_INSTANTIATE)

KILN_CUDA_MODULE(LayerNormKernel<float>);

}  // namespace kiln::cuda_kernels
