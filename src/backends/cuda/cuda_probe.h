// Run-time discovery of the NVIDIA driver and the CUDA libraries with dlopen: nothing here links
// libcuda or any CUDA library, so it builds with CUDA off and runs on machines without a GPU or a
// driver (everything missing is reported, never fatal). Used by `kiln doctor`.
//
// Libraries opened stay loaded for the life of the process (closing cuBLAS or the driver while
// their static state is alive is not safe). Not thread-safe: call from one thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cuda {

// One shared library looked up through the system loader.
struct LibraryProbe {
  std::string soname;        // what was asked for, e.g. "libcudnn.so.9"
  bool loaded = false;       // dlopen succeeded
  std::string path;          // the file the loader picked (empty when unknown)
  std::string error;         // dlopen/dlsym message or the failing call; empty when all went well
  int version = 0;           // library encoding: driver/runtime 13000, cuDNN 91900, cuBLAS 130100
  std::string version_text;  // "13.0", "9.19.0", "13.1.0"; empty when unknown
};

struct GpuInfo {
  int index = 0;
  std::string name;
  uint64_t memory_bytes = 0;
  int cc_major = 0;  // compute capability
  int cc_minor = 0;
};

struct DriverProbe {
  LibraryProbe library;  // libcuda.so.1; version: the CUDA version the driver supports
  bool initialized = false;
  std::string init_error;  // cuInit's failure, e.g. "CUDA_ERROR_NO_DEVICE (100): ..."
  int init_code = 0;       // cuInit's CUresult when it failed (100: no device, 34: stub library)
  std::vector<GpuInfo> gpus;
};

// libcuda.so.1: cuInit, cuDriverGetVersion, then each device's name, memory and capability.
DriverProbe ProbeDriver();

// Why this machine has no GPU to test on, when that is a fact of the machine and not a fault: no
// driver library (libcuda.so.1 does not load, or it is the toolkit's stub), or a driver that
// finds no device. "" when the driver lists a device -- and also when it fails in any other way
// (a broken install): then GPU tests must run and fail with what went wrong, never skip. The
// only legitimate reason for a GPU test to skip (tests/backends/cuda_device_test.cc).
std::string AbsentGpuReason(const DriverProbe& probe);
// libcudart.so.N (cudaRuntimeGetVersion), libcudnn.so.N (cudnnGetVersion; needs no GPU) and
// libcublas.so.N (cublasGetProperty); `soname` names the major version to look for.
LibraryProbe ProbeCudaRuntime(const std::string& soname);
LibraryProbe ProbeCudnn(const std::string& soname);
LibraryProbe ProbeCublas(const std::string& soname);

// "13.0" for 13000 (driver and runtime encoding: 1000 * major + 10 * minor).
std::string CudaVersionText(int version);
// cuDNN's encoding: 10000 * major + 100 * minor + patch from cuDNN 9, 1000 * major + 100 * minor +
// patch before.
std::string CudnnVersionText(int version);
// 10000 * major + 100 * minor + patch (CUBLAS_VERSION's encoding).
std::string CublasVersionText(int version);

}  // namespace kiln::cuda
