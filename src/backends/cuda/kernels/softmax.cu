// Softmax / LogSoftmax (softmax_math.h): one block of kReduceThreads threads per vector of the
// [outer, n, inner] view (grid-stride over the outer * inner vectors): a block max, a block sum of
// exp(x - shift), then each thread writes its strided elements. Reads are coalesced for inner == 1
// (the common last-axis case); for inner > 1 neighbouring threads are `inner` apart. float or Half
// storage (computed in float32); declared in launch.h.
#include <cuda_runtime.h>

#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/launch.h"
#include "backends/cuda/kernels/softmax_math.h"

namespace kiln::cuda_kernels {

template <typename T>
__global__ void SoftmaxKernel(const T* __restrict__ src, T* __restrict__ dst,
                              cuda_math::SoftmaxShape s, bool log_softmax) {
  __shared__ float smem[cuda_math::kReduceThreads];
  constexpr int kT = cuda_math::kReduceThreads;
  const int t = threadIdx.x;
  for (int64_t v = blockIdx.x; v < s.outer * s.inner; v += gridDim.x) {
    const int64_t base = cuda_math::SoftmaxVectorBase(s, v);
    const T* x = src + base;
    const cuda_math::LoadRow<T> row{x, s.inner};
    const float max =
        BlockReduce(cuda_math::ReduceKind::kMax,
                    cuda_math::ThreadPartial(cuda_math::ReduceKind::kMax, row, s.n, t, kT), smem);
    const float shift = cuda_math::SoftmaxShift(max);
    const cuda_math::LoadExpShifted<T> exps{x, s.inner, shift};
    const float sum =
        BlockReduce(cuda_math::ReduceKind::kSum,
                    cuda_math::ThreadPartial(cuda_math::ReduceKind::kSum, exps, s.n, t, kT), smem);
    for (int64_t j = t; j < s.n; j += kT)
      cuda_math::Store(
          &dst[base + j * s.inner],
          cuda_math::SoftmaxOut(cuda_math::ToFloat(x[j * s.inner]), shift, sum, log_softmax));
  }
}

template <typename T>
cudaError_t LaunchSoftmax(const T* src, T* dst, const cuda_math::SoftmaxShape& shape,
                          bool log_softmax, cudaStream_t stream) {
  const int64_t vectors = shape.outer * shape.inner;
  if (vectors <= 0 || shape.n <= 0) return cudaSuccess;
  SoftmaxKernel<T>
      <<<GridFor(vectors, 1), cuda_math::kReduceThreads, 0, stream>>>(src, dst, shape, log_softmax);
  return cudaGetLastError();
}

#define KILN_INSTANTIATE(T)                                                                 \
  template cudaError_t LaunchSoftmax<T>(const T*, T*, const cuda_math::SoftmaxShape&, bool, \
                                        cudaStream_t);
KILN_FLOAT_STORAGE(KILN_INSTANTIATE)

KILN_CUDA_MODULE(SoftmaxKernel<float>);

}  // namespace kiln::cuda_kernels
