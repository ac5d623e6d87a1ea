#include "backends/cuda/cuda_check.h"

#include <map>

namespace kiln::cuda {

namespace {
std::string Call(const char* call) {
  std::string s = call;
  const size_t paren = s.find('(');
  return paren == std::string::npos ? s : s.substr(0, paren);
}
}  // namespace

Status CheckCuda(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return OkStatus();
  Status s = DeviceError(Call(call) + " failed: " + cudaGetErrorName(e) + " (" +
                         cudaGetErrorString(e) + ")");
  if (e == cudaErrorMemoryAllocation) s = Status(StatusCode::kOutOfMemory, s.message());
  return s;
}

Status CheckCudnn(cudnnStatus_t e, const char* call) {
  if (e == CUDNN_STATUS_SUCCESS) return OkStatus();
  return DeviceError(Call(call) + " failed: " + cudnnGetErrorString(e) + " (status " +
                     std::to_string(static_cast<int>(e)) + ")");
}

Status CheckCublas(cublasStatus_t e, const char* call) {
  if (e == CUBLAS_STATUS_SUCCESS) return OkStatus();
  return DeviceError(Call(call) + " failed: " + cublasGetStatusName(e) + " (" +
                     cublasGetStatusString(e) + ")");
}

// Handles live until the process exits: destroying them from thread-exit destructors can run
// after the CUDA context is gone, so they are deliberately not destroyed.
StatusOr<cudnnHandle_t> CudnnHandle(cudaStream_t stream) {
  thread_local std::map<int, cudnnHandle_t> handles;
  int device = 0;
  KILN_CUDA_CHECK(cudaGetDevice(&device));
  cudnnHandle_t& h = handles[device];
  if (h == nullptr) KILN_CUDNN_CHECK(cudnnCreate(&h));
  KILN_CUDNN_CHECK(cudnnSetStream(h, stream));
  return h;
}

StatusOr<cublasHandle_t> CublasHandle(cudaStream_t stream) {
  thread_local std::map<int, cublasHandle_t> handles;
  int device = 0;
  KILN_CUDA_CHECK(cudaGetDevice(&device));
  cublasHandle_t& h = handles[device];
  if (h == nullptr) KILN_CUBLAS_CHECK(cublasCreate(&h));
  KILN_CUBLAS_CHECK(cublasSetStream(h, stream));
  return h;
}

}  // namespace kiln::cuda
