// Reduce* over a set of axes (reduce_axes_math.h). Block path (ReduceAxesShape::block_per_output):
// one block of kReduceThreads threads per output of the [outer, reduce, inner] view (grid-stride
// over outputs), each thread folding a strided slice of the row, then the block tree of
// kernel_util.cuh, and for Max/Min a second tree that carries NaN. Thread path: one thread per
// output (grid-stride), StridedReduceAt walking the reduced dims. float or Half storage (computed
// in float32); declared in launch.h.
#include <cuda_runtime.h>

#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/launch.h"
#include "backends/cuda/kernels/reduce_axes_math.h"

namespace kiln::cuda_kernels {

template <typename T>
__global__ void ReduceRowsKernel(const T* __restrict__ src, T* __restrict__ dst,
                                 cuda_math::ReduceAxesShape s, cuda_math::ReduceOp op) {
  __shared__ float smem[cuda_math::kReduceThreads];
  const cuda_math::ReduceKind kind = cuda_math::FoldKind(op);
  for (int64_t o = blockIdx.x; o < s.outputs; o += gridDim.x) {
    const cuda_math::LoadReduced<T> load{src + cuda_math::ReduceRowBase(s, o), s.inner, op};
    const float p =
        cuda_math::ReducePartial(kind, load, s.reduce, threadIdx.x, cuda_math::kReduceThreads);
    float r = BlockReduce(kind, p, smem);
    if (kind == cuda_math::ReduceKind::kMax) {  // uniform over the block
      const float nan = BlockReduce(cuda_math::ReduceKind::kSum, cuda_math::NanOrZero(p), smem);
      if (nan != nan) r = nan;
    }
    if (threadIdx.x == 0) cuda_math::Store(&dst[o], cuda_math::ReduceFinish(op, r, s.reduce));
  }
}

template <typename T>
__global__ void ReduceStridedKernel(const T* __restrict__ src, T* __restrict__ dst,
                                    cuda_math::ReduceAxesShape s, cuda_math::ReduceOp op) {
  for (int64_t o = GridStart(); o < s.outputs; o += GridStep())
    cuda_math::Store(&dst[o], cuda_math::StridedReduceAt(op, src, s, o));
}

template <typename T>
cudaError_t LaunchReduceAxes(const T* src, T* dst, const cuda_math::ReduceAxesShape& shape, int op,
                             cudaStream_t stream) {
  if (shape.outputs <= 0) return cudaSuccess;
  const auto rop = static_cast<cuda_math::ReduceOp>(op);
  if (shape.block_per_output) {
    ReduceRowsKernel<T>
        <<<GridFor(shape.outputs, 1), cuda_math::kReduceThreads, 0, stream>>>(src, dst, shape, rop);
  } else {
    ReduceStridedKernel<T><<<GridFor(shape.outputs), kThreads, 0, stream>>>(src, dst, shape, rop);
  }
  return cudaGetLastError();
}

#define KILN_INSTANTIATE(T)                                                                      \
  template cudaError_t LaunchReduceAxes<T>(const T*, T*, const cuda_math::ReduceAxesShape&, int, \
                                           cudaStream_t);
KILN_FLOAT_STORAGE(KILN_INSTANTIATE)

KILN_CUDA_MODULE(ReduceRowsKernel<float>);

}  // namespace kiln::cuda_kernels
