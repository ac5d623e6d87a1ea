// Checked CUDA, cuDNN and cuBLAS calls: a failure becomes a DeviceError Status naming the API
// call, the library's error name and its message (and, from the caller's context, the node),
// never an abort. Thread-local library handles, one per thread and device, created on first use.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <string>

#include "kiln/status.h"

namespace kiln::cuda {

Status CheckCuda(cudaError_t e, const char* call);
Status CheckCudnn(cudnnStatus_t e, const char* call);
Status CheckCublas(cublasStatus_t e, const char* call);

// The calling thread's handles for the current device (cudaGetDevice), bound to `stream`.
StatusOr<cudnnHandle_t> CudnnHandle(cudaStream_t stream);
StatusOr<cublasHandle_t> CublasHandle(cudaStream_t stream);

}  // namespace kiln::cuda

#define KILN_CUDA_CHECK(call) KILN_RETURN_IF_ERROR(::kiln::cuda::CheckCuda((call), #call))
#define KILN_CUDNN_CHECK(call) KILN_RETURN_IF_ERROR(::kiln::cuda::CheckCudnn((call), #call))
#define KILN_CUBLAS_CHECK(call) KILN_RETURN_IF_ERROR(::kiln::cuda::CheckCublas((call), #call))
