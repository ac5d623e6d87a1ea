// A stand-in for the NVIDIA driver (built as libcuda.so.1 in the test folder), so `kiln doctor`'s
// GPU paths run on machines without a GPU: put its folder on LD_LIBRARY_PATH. Implements only the
// entry points doctor uses (cuda.h signatures with int-sized CUresult/CUdevice). Driven by env:
//   FAKE_CUDA_DEVICES   comma-separated compute capabilities, e.g. "8.6,12.0" (default: none)
//   FAKE_CUDA_VERSION   what cuDriverGetVersion reports (default 13000)
//   FAKE_CUDA_INIT_ERROR  a CUresult for cuInit to return (e.g. 100, CUDA_ERROR_NO_DEVICE)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Cc {
  int major, minor;
};

std::vector<Cc> Devices() {
  std::vector<Cc> out;
  const char* env = std::getenv("FAKE_CUDA_DEVICES");
  std::string s = env ? env : "";
  size_t p = 0;
  while (p < s.size()) {
    size_t e = s.find(',', p);
    if (e == std::string::npos) e = s.size();
    Cc cc{0, 0};
    if (std::sscanf(s.substr(p, e - p).c_str(), "%d.%d", &cc.major, &cc.minor) == 2)
      out.push_back(cc);
    p = e + 1;
  }
  return out;
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

}  // namespace

extern "C" {

int cuInit(unsigned) { return EnvInt("FAKE_CUDA_INIT_ERROR", 0); }

int cuDriverGetVersion(int* v) {
  *v = EnvInt("FAKE_CUDA_VERSION", 13000);
  return 0;
}

int cuDeviceGetCount(int* n) {
  *n = static_cast<int>(Devices().size());
  return 0;
}

int cuDeviceGet(int* dev, int ordinal) {
  if (ordinal < 0 || ordinal >= static_cast<int>(Devices().size())) return 101;
  *dev = ordinal;
  return 0;
}

int cuDeviceGetName(char* name, int len, int dev) {
  std::snprintf(name, len, "Fake GPU %d", dev);
  return 0;
}

int cuDeviceTotalMem_v2(size_t* bytes, int dev) {
  *bytes = (16ull + dev) << 30;
  return 0;
}

int cuDeviceGetAttribute(int* value, int attr, int dev) {
  std::vector<Cc> d = Devices();
  if (dev < 0 || dev >= static_cast<int>(d.size())) return 101;
  if (attr == 75)
    *value = d[dev].major;
  else if (attr == 76)
    *value = d[dev].minor;
  else
    return 1;
  return 0;
}

int cuGetErrorName(int code, const char** s) {
  *s = code == 100 ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN";
  return 0;
}

int cuGetErrorString(int code, const char** s) {
  *s = code == 100 ? "no CUDA-capable device is detected" : "unknown error";
  return 0;
}

}  // extern "C"
