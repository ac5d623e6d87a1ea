// Trilu (ops/tensor/trilu.h): one thread per element, grid-stride loop; an element is copied when
// its column is in the span its row keeps (ops::TriluKeptColumns, the reference's own function),
// else zeroed. Elements move as unsigned integers of elem_bytes (1, 2, 4 or 8), so every
// fixed-size dtype runs bit for bit. Its one caller (ops/trilu_cuda.cc) declares the launcher.
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels/kernel_util.cuh"
#include "backends/cuda/kernels/launch.h"
#include "ops/tensor/trilu.h"

namespace kiln::cuda_kernels {

template <typename T>
__global__ void TriluKernel(const T* __restrict__ src, T* __restrict__ dst, int64_t n, int64_t rows,
                            int64_t cols, int64_t k, bool upper) {
  for (int64_t i = GridStart(); i < n; i += GridStep()) {
    const int64_t col = i % cols, row = (i / cols) % rows;
    const ops::TriluSpan span = ops::TriluKeptColumns(row, rows, cols, k, upper);
    dst[i] = col >= span.begin && col < span.end ? src[i] : T{0};
  }
}

template <typename T>
cudaError_t LaunchTriluTyped(const void* src, void* dst, int64_t n, int64_t rows, int64_t cols,
                             int64_t k, bool upper, cudaStream_t stream) {
  TriluKernel<T><<<GridFor(n), kThreads, 0, stream>>>(
      static_cast<const T*>(src), static_cast<T*>(dst), n, rows, cols, k, upper);
  return cudaGetLastError();
}

cudaError_t LaunchTrilu(const void* src, void* dst, int64_t n, int64_t rows, int64_t cols,
                        int64_t k, bool upper, int64_t elem_bytes, cudaStream_t stream) {
  if (n <= 0 || rows <= 0 || cols <= 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1:
      return LaunchTriluTyped<uint8_t>(src, dst, n, rows, cols, k, upper, stream);
    case 2:
      return LaunchTriluTyped<uint16_t>(src, dst, n, rows, cols, k, upper, stream);
    case 4:
      return LaunchTriluTyped<uint32_t>(src, dst, n, rows, cols, k, upper, stream);
    case 8:
      return LaunchTriluTyped<uint64_t>(src, dst, n, rows, cols, k, upper, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

KILN_CUDA_MODULE(TriluKernel<float>);

}  // namespace kiln::cuda_kernels
