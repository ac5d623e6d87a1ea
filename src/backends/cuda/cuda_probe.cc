// dlopen probes of the driver and CUDA libraries. The function types below restate the documented C
// signatures of the few entry points used (CUresult, cudaError_t, cudnn/cublas statuses and
// CUdevice are all int-sized), so no CUDA header is needed.
#include "backends/cuda/cuda_probe.h"

#include <dlfcn.h>

#include <cstddef>

namespace kiln::cuda {
namespace {

// CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR in cuda.h.
constexpr int kAttrCcMajor = 75;
constexpr int kAttrCcMinor = 76;
// libraryPropertyType: MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL.
constexpr int kPropMajor = 0, kPropMinor = 1, kPropPatch = 2;

using CuInitFn = int (*)(unsigned);
using CuIntFn = int (*)(int*);
using CuDeviceGetFn = int (*)(int*, int);
using CuDeviceGetNameFn = int (*)(char*, int, int);
using CuDeviceTotalMemFn = int (*)(size_t*, int);
using CuDeviceGetAttributeFn = int (*)(int*, int, int);
using CuGetErrorFn = int (*)(int, const char**);
using CudnnGetVersionFn = size_t (*)();
using CublasGetPropertyFn = int (*)(int, int*);

std::string DlError() {
  const char* e = dlerror();
  return e ? e : "unknown dlopen error";
}

// Opens `soname`; on success records the path the loader resolved it to.
void* Open(LibraryProbe* probe) {
  dlerror();
  void* h = dlopen(probe->soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    probe->error = DlError();
    return nullptr;
  }
  probe->loaded = true;
  return h;
}

// Looks up `name`; on failure records why. Also fills probe->path from the symbol's object.
template <typename Fn>
Fn Symbol(void* handle, const char* name, LibraryProbe* probe) {
  dlerror();
  void* sym = dlsym(handle, name);
  if (sym == nullptr) {
    if (probe->error.empty())
      probe->error = "missing symbol " + std::string(name) + ": " + DlError();
    return nullptr;
  }
  Dl_info info;
  if (probe->path.empty() && dladdr(sym, &info) != 0 && info.dli_fname != nullptr)
    probe->path = info.dli_fname;
  return reinterpret_cast<Fn>(sym);
}

std::string DriverError(void* h, int code) {
  const char* name = nullptr;
  const char* text = nullptr;
  dlerror();
  auto get_name = reinterpret_cast<CuGetErrorFn>(dlsym(h, "cuGetErrorName"));
  auto get_text = reinterpret_cast<CuGetErrorFn>(dlsym(h, "cuGetErrorString"));
  if (get_name) get_name(code, &name);
  if (get_text) get_text(code, &text);
  std::string s = name ? name : "CUDA error";
  s += " (" + std::to_string(code) + ")";
  if (text) s += ": " + std::string(text);
  return s;
}

}  // namespace

std::string CudaVersionText(int version) {
  if (version <= 0) return "";
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::string CudnnVersionText(int version) {
  if (version <= 0) return "";
  if (version >= 90000)
    return std::to_string(version / 10000) + "." + std::to_string(version % 10000 / 100) + "." +
           std::to_string(version % 100);
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 100) + "." +
         std::to_string(version % 100);
}

std::string CublasVersionText(int version) {
  if (version <= 0) return "";
  return std::to_string(version / 10000) + "." + std::to_string(version % 10000 / 100) + "." +
         std::to_string(version % 100);
}

std::string AbsentGpuReason(const DriverProbe& probe) {
  constexpr int kNoDevice = 100, kStubLibrary = 34;  // CUDA_ERROR_NO_DEVICE, _STUB_LIBRARY
  if (!probe.library.loaded)
    return "no NVIDIA driver: " + probe.library.soname + " does not load (" + probe.library.error +
           ")";
  if (probe.init_code == kNoDevice || probe.init_code == kStubLibrary)
    return "the NVIDIA driver finds no device: " + probe.init_error;
  if (probe.initialized && probe.gpus.empty() && probe.init_error.empty())
    return "the NVIDIA driver lists no device";
  return "";
}

DriverProbe ProbeDriver() {
  DriverProbe d;
  d.library.soname = "libcuda.so.1";
  void* h = Open(&d.library);
  if (h == nullptr) return d;
  auto init = Symbol<CuInitFn>(h, "cuInit", &d.library);
  auto driver_version = Symbol<CuIntFn>(h, "cuDriverGetVersion", &d.library);
  auto count = Symbol<CuIntFn>(h, "cuDeviceGetCount", &d.library);
  auto get = Symbol<CuDeviceGetFn>(h, "cuDeviceGet", &d.library);
  auto name = Symbol<CuDeviceGetNameFn>(h, "cuDeviceGetName", &d.library);
  auto mem = Symbol<CuDeviceTotalMemFn>(h, "cuDeviceTotalMem_v2", &d.library);
  auto attr = Symbol<CuDeviceGetAttributeFn>(h, "cuDeviceGetAttribute", &d.library);
  if (driver_version != nullptr && driver_version(&d.library.version) == 0)
    d.library.version_text = CudaVersionText(d.library.version);
  if (!init || !count || !get || !name || !mem || !attr) return d;
  if (int rc = init(0); rc != 0) {
    d.init_error = "cuInit failed: " + DriverError(h, rc);
    d.init_code = rc;
    return d;
  }
  d.initialized = true;
  int n = 0;
  if (int rc = count(&n); rc != 0) {
    d.init_error = "cuDeviceGetCount failed: " + DriverError(h, rc);
    return d;
  }
  for (int i = 0; i < n; ++i) {
    GpuInfo g;
    g.index = i;
    int dev = 0;
    if (int rc = get(&dev, i); rc != 0) {
      d.init_error = "cuDeviceGet(" + std::to_string(i) + ") failed: " + DriverError(h, rc);
      continue;
    }
    char buf[256] = {};
    if (name(buf, sizeof(buf) - 1, dev) == 0) g.name = buf;
    size_t bytes = 0;
    if (mem(&bytes, dev) == 0) g.memory_bytes = bytes;
    attr(&g.cc_major, kAttrCcMajor, dev);
    attr(&g.cc_minor, kAttrCcMinor, dev);
    d.gpus.push_back(g);
  }
  return d;
}

LibraryProbe ProbeCudaRuntime(const std::string& soname) {
  LibraryProbe p;
  p.soname = soname;
  void* h = Open(&p);
  if (h == nullptr) return p;
  auto fn = Symbol<CuIntFn>(h, "cudaRuntimeGetVersion", &p);
  if (fn == nullptr) return p;
  if (int rc = fn(&p.version); rc != 0)
    p.error = "cudaRuntimeGetVersion returned " + std::to_string(rc);
  else
    p.version_text = CudaVersionText(p.version);
  return p;
}

LibraryProbe ProbeCudnn(const std::string& soname) {
  LibraryProbe p;
  p.soname = soname;
  void* h = Open(&p);
  if (h == nullptr) return p;
  auto fn = Symbol<CudnnGetVersionFn>(h, "cudnnGetVersion", &p);
  if (fn == nullptr) return p;
  p.version = static_cast<int>(fn());
  p.version_text = CudnnVersionText(p.version);
  return p;
}

LibraryProbe ProbeCublas(const std::string& soname) {
  LibraryProbe p;
  p.soname = soname;
  void* h = Open(&p);
  if (h == nullptr) return p;
  auto fn = Symbol<CublasGetPropertyFn>(h, "cublasGetProperty", &p);
  if (fn == nullptr) return p;
  int major = 0, minor = 0, patch = 0;
  if (fn(kPropMajor, &major) != 0 || fn(kPropMinor, &minor) != 0 || fn(kPropPatch, &patch) != 0) {
    p.error = "cublasGetProperty failed";
    return p;
  }
  p.version = major * 10000 + minor * 100 + patch;
  p.version_text = CublasVersionText(p.version);
  return p;
}

}  // namespace kiln::cuda
