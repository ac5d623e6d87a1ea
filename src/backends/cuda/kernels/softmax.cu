// Softmax / LogSoftmax (softmax_math.h): one block of kReduceThreads threads per vector of the
// [outer, n, inner] view (grid-stride over the outer * inner vectors): a block max, a block sum of
// exp(x - shift), then each thread writes its strided elements. Reads are coalesced for inner == 1
// (the common last-axis case); for inner > 1 neighbouring threads are `inner` apart. Float32;
// declared in launch.h.
#include <cuda_runtime.h>

#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/launch.h"
#include "backends/cuda/kernels/softmax_math.h"

namespace kiln::cuda_kernels {

__global__ void SoftmaxKernel(const float* __restrict__ src, float* __restrict__ dst,
                              cuda_math::SoftmaxShape s, bool log_softmax) {
  __shared__ float smem[cuda_math::kReduceThreads];
  constexpr int kT = cuda_math::kReduceThreads;
  const int t = threadIdx.x;
  for (int64_t v = blockIdx.x; v < s.outer * s.inner; v += gridDim.x) {
    const int64_t base = cuda_math::SoftmaxVectorBase(s, v);
    const float* x = src + base;
    const cuda_math::LoadRow row{x, s.inner};
    const float max =
        BlockReduce(cuda_math::ReduceKind::kMax,
                    cuda_math::ThreadPartial(cuda_math::ReduceKind::kMax, row, s.n, t, kT), smem);
    const float shift = cuda_math::SoftmaxShift(max);
    const cuda_math::LoadExpShifted exps{x, s.inner, shift};
    const float sum =
        BlockReduce(cuda_math::ReduceKind::kSum,
                    cuda_math::ThreadPartial(cuda_math::ReduceKind::kSum, exps, s.n, t, kT), smem);
    for (int64_t j = t; j < s.n; j += kT)
      dst[base + j * s.inner] = cuda_math::SoftmaxOut(x[j * s.inner], shift, sum, log_softmax);
  }
}

cudaError_t LaunchSoftmax(const float* src, float* dst, const cuda_math::SoftmaxShape& shape,
                          bool log_softmax, cudaStream_t stream) {
  const int64_t vectors = shape.outer * shape.inner;
  if (vectors <= 0 || shape.n <= 0) return cudaSuccess;
  SoftmaxKernel<<<GridFor(vectors, 1), cuda_math::kReduceThreads, 0, stream>>>(src, dst, shape,
                                                                               log_softmax);
  return cudaGetLastError();
}

KILN_CUDA_MODULE(SoftmaxKernel);

}  // namespace kiln::cuda_kernels
