// Launchers of the float32 <-> float16 kernels (cast.cu); half values are their uint16_t bits.
// Plain C++. Enqueue on `stream`, return the launch's cudaError_t.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kiln::cuda_kernels {

cudaError_t LaunchFloatToHalf(const float* src, uint16_t* dst, int64_t n, cudaStream_t stream);
cudaError_t LaunchHalfToFloat(const uint16_t* src, float* dst, int64_t n, cudaStream_t stream);

}  // namespace kiln::cuda_kernels
