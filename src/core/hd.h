// KILN_HD marks a function callable from host and device code: __host__ __device__ inline under
// nvcc, plain inline elsewhere. Headers whose math both the reference kernels and the CUDA kernels
// compile (ops/activation_math.h, backends/cuda/kernels/*_math.h) use it.
#pragma once

#if defined(__CUDACC__)
#define KILN_HD __host__ __device__ __forceinline__
#else
#define KILN_HD inline
#endif
