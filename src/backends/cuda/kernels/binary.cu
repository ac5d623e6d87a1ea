// Broadcast binary kernels (Add, Sub, Mul, Div, Pow, Max, Min; binary_math.h). A grid-stride
// loop over output elements; the general kernel maps each output index to operand offsets with
// BroadcastOffsets (one div/mod per merged dim). Fast path: an index that merged to rank <= 1
// (same shapes, or a scalar operand) runs a flat kernel reading a[i * sa], b[i * sb] with
// strides 0 or 1. float or Half storage (computed in float32); declared in launch.h.
#include <cuda_runtime.h>

#include "backends/cuda/kernels/binary_math.h"
#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/launch.h"

namespace kiln::cuda_kernels {

template <typename T>
__global__ void BinaryFlatKernel(const T* a, const T* b, T* dst, int64_t n, int64_t a_stride,
                                 int64_t b_stride, int op) {
  using cuda_math::ToFloat;
  const auto bop = static_cast<cuda_math::BinaryOp>(op);
  for (int64_t i = GridStart(); i < n; i += GridStep())
    cuda_math::Store(
        &dst[i], cuda_math::ApplyBinary(bop, ToFloat(a[i * a_stride]), ToFloat(b[i * b_stride])));
}

template <typename T>
__global__ void BinaryBroadcastKernel(const T* a, const T* b, T* dst, int64_t n,
                                      cuda_math::BroadcastIndex index, int op) {
  using cuda_math::ToFloat;
  const auto bop = static_cast<cuda_math::BinaryOp>(op);
  for (int64_t i = GridStart(); i < n; i += GridStep()) {
    int64_t ia, ib;
    cuda_math::BroadcastOffsets(index, i, &ia, &ib);
    cuda_math::Store(&dst[i], cuda_math::ApplyBinary(bop, ToFloat(a[ia]), ToFloat(b[ib])));
  }
}

template <typename T>
cudaError_t LaunchBinary(int op, const T* a, const T* b, T* dst,
                         const cuda_math::BroadcastIndex& index, cudaStream_t stream) {
  const int64_t n = cuda_math::OutputElements(index);
  if (n <= 0) return cudaSuccess;
  if (index.rank <= 1) {
    const int64_t sa = index.rank == 1 ? index.a_strides[0] : 0;
    const int64_t sb = index.rank == 1 ? index.b_strides[0] : 0;
    BinaryFlatKernel<T><<<GridFor(n), kThreads, 0, stream>>>(a, b, dst, n, sa, sb, op);
  } else {
    BinaryBroadcastKernel<T><<<GridFor(n), kThreads, 0, stream>>>(a, b, dst, n, index, op);
  }
  return cudaGetLastError();
}

#define KILN_INSTANTIATE(T)                                         \
  template cudaError_t LaunchBinary<T>(int, const T*, const T*, T*, \
                                       const cuda_math::BroadcastIndex&, cudaStream_t);
KILN_FLOAT_STORAGE(KILN_INSTANTIATE)

KILN_CUDA_MODULE(BinaryFlatKernel<float>);

}  // namespace kiln::cuda_kernels
