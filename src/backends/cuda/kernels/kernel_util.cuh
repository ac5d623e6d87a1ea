// Device-side helpers shared by the .cu kernels (nvcc only): the 1-D launch shape of the
// elementwise kernels (kThreads threads, grid capped so a grid-stride loop covers the rest) and
// the block reduction whose combination order reduce_math.h specifies and the CPU tests replay.
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/kernels/reduce_math.h"

namespace kiln::cuda_kernels {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535LL * 16;

// Blocks for `work` items (threads or rows, `per_block` per block), at most kMaxBlocks.
inline unsigned GridFor(int64_t work, int64_t per_block = kThreads) {
  const int64_t blocks = (work + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// First index and step of a grid-stride loop over elements.
__device__ __forceinline__ int64_t GridStart() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ __forceinline__ int64_t GridStep() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// Combines each thread's `v` over a block of cuda_math::kReduceThreads threads: the pairwise tree
// of reduce_math.h. Every thread gets the result. `smem` holds kReduceThreads floats.
__device__ __forceinline__ float BlockReduce(cuda_math::ReduceKind k, float v, float* smem) {
  const int t = threadIdx.x;
  smem[t] = v;
  __syncthreads();
  for (int s = cuda_math::kReduceThreads / 2; s > 0; s >>= 1) {
    if (t < s) smem[t] = cuda_math::Combine(k, smem[t], smem[t + s]);
    __syncthreads();
  }
  const float r = smem[0];
  __syncthreads();
  return r;
}

}  // namespace kiln::cuda_kernels
