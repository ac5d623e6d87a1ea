// What the CUDA part of kiln was compiled against, read from the toolkit's headers at build time
// (CUDART_VERSION, CUDNN_VERSION, CUBLAS_VER_*). Defined only in CUDA-enabled builds (kiln_cuda);
// `kiln doctor` compares it with the libraries found at run time.
#pragma once

#include <string>

namespace kiln::cuda {

struct CudaBuildInfo {
  int cudart_version = 0;      // 13000 for CUDA 13.0
  int cudnn_version = 0;       // CUDNN_VERSION, 0 when cuDNN's headers were absent at build time
  int cublas_version = 0;      // 10000 * major + 100 * minor + patch, 0 when headers were absent
  std::string architectures;   // CMAKE_CUDA_ARCHITECTURES, e.g. "75-real;...;90-virtual"
  bool cudart_static = false;  // the CUDA runtime is linked statically (libcudart_static)
};

CudaBuildInfo GetCudaBuildInfo();

}  // namespace kiln::cuda
