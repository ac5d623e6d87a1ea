// LayerNormalization (layernorm_math.h): one block of kReduceThreads threads per row (grid-stride
// over rows): a block sum for the mean, a block sum of squared deviations for the biased
// variance, then each thread normalises its strided columns. Float32, [rows, cols] dense;
// declared in launch.h.
#include <cuda_runtime.h>

#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/launch.h"
#include "backends/cuda/kernels/layernorm_math.h"

namespace kiln::cuda_kernels {

__global__ void LayerNormKernel(const float* __restrict__ src, float* __restrict__ dst,
                                const float* __restrict__ gamma, const float* __restrict__ beta,
                                int64_t rows, int64_t cols, float epsilon) {
  __shared__ float smem[cuda_math::kReduceThreads];
  constexpr int kT = cuda_math::kReduceThreads;
  constexpr auto kSum = cuda_math::ReduceKind::kSum;
  const int t = threadIdx.x;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = src + r * cols;
    const cuda_math::LoadRow row{x, 1};
    const float mean = BlockReduce(kSum, cuda_math::ThreadPartial(kSum, row, cols, t, kT), smem) /
                       static_cast<float>(cols);
    const cuda_math::LoadSquaredDev dev{x, mean};
    const float inv = cuda_math::LayerNormInvStd(
        BlockReduce(kSum, cuda_math::ThreadPartial(kSum, dev, cols, t, kT), smem), cols, epsilon);
    for (int64_t j = t; j < cols; j += kT)
      dst[r * cols + j] = cuda_math::LayerNormOut(x[j], mean, inv, gamma, beta, j);
  }
}

cudaError_t LaunchLayerNorm(const float* src, float* dst, const float* gamma, const float* beta,
                            int64_t rows, int64_t cols, float epsilon, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  LayerNormKernel<<<GridFor(rows, 1), cuda_math::kReduceThreads, 0, stream>>>(src, dst, gamma, beta,
                                                                              rows, cols, epsilon);
  return cudaGetLastError();
}

KILN_CUDA_MODULE(LayerNormKernel);

}  // namespace kiln::cuda_kernels
