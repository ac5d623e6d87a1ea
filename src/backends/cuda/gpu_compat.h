// Whether a GPU can run kiln's embedded CUDA code natively or needs the driver to JIT-compile PTX,
// and whether the driver's JIT cache will keep that work between runs. Pure functions over facts
// gathered elsewhere (fatbin.h, cuda_probe.h, the environment), so they are unit-tested without a
// GPU. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cuda {

enum class Verdict { kNative, kPtxJit, kUnsupported };
const char* VerdictName(Verdict v);  // "native", "ptx_jit", "unsupported"

struct GpuVerdict {
  Verdict verdict = Verdict::kUnsupported;
  int sass_arch = 0;  // the cubin the driver will load (kNative), else 0
  int ptx_arch = 0;   // the PTX the driver will compile (kPtxJit), else 0
  std::string explanation;
};

// SASS built for sm_XY runs on compute capability X.Z for Z >= Y (same major); PTX for compute_XY
// is compiled by the driver for any capability >= X.Y. Arch numbers are 10 * major + minor.
GpuVerdict JudgeGpu(int cc_major, int cc_minor, const std::vector<int>& sass,
                    const std::vector<int>& ptx);

// The driver's JIT cache settings (CUDA Programming Guide, "CUDA Environment Variables"):
// CUDA_CACHE_DISABLE=1 turns the cache off; CUDA_CACHE_MAXSIZE is its size in bytes (default 1 GiB
// on desktop and server platforms, at most 4 GiB); CUDA_CACHE_PATH its folder (default
// ~/.nv/ComputeCache).
inline constexpr uint64_t kJitCacheDefaultBytes = 1ull << 30;
inline constexpr uint64_t kJitCacheMaxBytes = 4ull << 30;

struct JitCacheSettings {
  std::string disable_env;  // raw values; empty when unset
  std::string maxsize_env;
  std::string path_env;
  bool disabled = false;
  uint64_t max_bytes = kJitCacheDefaultBytes;
  bool max_bytes_valid = true;  // false when CUDA_CACHE_MAXSIZE is not a number
  std::string path;             // effective folder
};

// From the raw variable values (nullptr when unset) and $HOME.
JitCacheSettings ReadJitCacheSettings(const char* disable, const char* maxsize, const char* path,
                                      const char* home);
// The same from this process's environment.
JitCacheSettings JitCacheSettingsFromEnv();

// Advice lines for a GPU that needs PTX JIT producing about `jit_bytes` of code: empty when the
// cache is on, big enough and writable. `writable` says whether the cache folder (or the nearest
// existing parent it would be created under) can be written.
std::vector<std::string> JitCacheAdvice(const JitCacheSettings& s, uint64_t jit_bytes,
                                        bool writable);
// Whether `path`, or its nearest existing parent, is writable by this process.
bool CacheFolderWritable(const std::string& path);

}  // namespace kiln::cuda
