// Compiled in CUDA-enabled builds only: the versions come from the toolkit headers this file sees.
#include "backends/cuda/build_info.h"

#include <cuda_runtime_api.h>

#if __has_include(<cudnn_version.h>)
#include <cudnn_version.h>
#endif
#if __has_include(<cublas_api.h>)
#include <cublas_api.h>
#endif

#ifndef KILN_CUDA_ARCHITECTURES
#define KILN_CUDA_ARCHITECTURES ""
#endif

namespace kiln::cuda {

CudaBuildInfo GetCudaBuildInfo() {
  CudaBuildInfo info;
  info.cudart_version = CUDART_VERSION;
#ifdef CUDNN_VERSION
  info.cudnn_version = CUDNN_VERSION;
#endif
#ifdef CUBLAS_VER_MAJOR
  info.cublas_version = CUBLAS_VER_MAJOR * 10000 + CUBLAS_VER_MINOR * 100 + CUBLAS_VER_PATCH;
#endif
  info.architectures = KILN_CUDA_ARCHITECTURES;
#ifdef KILN_CUDART_STATIC
  info.cudart_static = true;
#endif
  return info;
}

}  // namespace kiln::cuda
