#include "backends/cuda/gpu_compat.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace kiln::cuda {
namespace {

std::string Arch(const char* prefix, int arch) { return prefix + std::to_string(arch); }

std::string Join(const char* prefix, const std::vector<int>& archs) {
  std::string s;
  for (int a : archs) s += (s.empty() ? "" : ", ") + Arch(prefix, a);
  return s.empty() ? "none" : s;
}

std::string Bytes(uint64_t b) {
  char buf[64];
  if (b >= (1ull << 20))
    std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(b) / (1 << 20));
  else
    std::snprintf(buf, sizeof(buf), "%.1f KiB", static_cast<double>(b) / (1 << 10));
  return buf;
}

}  // namespace

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kNative:
      return "native";
    case Verdict::kPtxJit:
      return "ptx_jit";
    case Verdict::kUnsupported:
      return "unsupported";
  }
  return "unsupported";
}

GpuVerdict JudgeGpu(int cc_major, int cc_minor, const std::vector<int>& sass,
                    const std::vector<int>& ptx) {
  GpuVerdict v;
  const int cc = cc_major * 10 + cc_minor;
  const std::string sm = Arch("sm_", cc);
  for (int a : sass)
    if (a / 10 == cc_major && a % 10 <= cc_minor && a > v.sass_arch) v.sass_arch = a;
  if (v.sass_arch != 0) {
    v.verdict = Verdict::kNative;
    v.explanation = v.sass_arch == cc ? "native: kiln carries SASS for " + sm
                                      : "native: SASS for " + Arch("sm_", v.sass_arch) +
                                            " runs on " + sm + " (same major version)";
    return v;
  }
  for (int a : ptx)
    if (a <= cc && a > v.ptx_arch) v.ptx_arch = a;
  if (v.ptx_arch != 0) {
    v.verdict = Verdict::kPtxJit;
    v.explanation = "PTX JIT needed: no SASS for " + sm + " (kiln has " + Join("sm_", sass) +
                    "); the driver compiles " + Arch("compute_", v.ptx_arch) +
                    " PTX at first use, which is slow without a warm JIT cache";
    return v;
  }
  v.verdict = Verdict::kUnsupported;
  v.explanation = "unsupported: no SASS for " + sm + " and no PTX at or below it (kiln has SASS " +
                  Join("sm_", sass) + ", PTX " + Join("compute_", ptx) + ")";
  return v;
}

JitCacheSettings ReadJitCacheSettings(const char* disable, const char* maxsize, const char* path,
                                      const char* home) {
  JitCacheSettings s;
  s.disable_env = disable ? disable : "";
  s.maxsize_env = maxsize ? maxsize : "";
  s.path_env = path ? path : "";
  s.disabled = s.disable_env == "1";
  if (!s.maxsize_env.empty()) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(s.maxsize_env.c_str(), &end, 10);
    if (end == s.maxsize_env.c_str() || *end != '\0' || s.maxsize_env[0] == '-') {
      s.max_bytes_valid = false;
    } else {
      s.max_bytes = v > kJitCacheMaxBytes ? kJitCacheMaxBytes : v;
    }
  }
  if (!s.path_env.empty())
    s.path = s.path_env;
  else
    s.path = std::string(home && *home ? home : "~") + "/.nv/ComputeCache";
  return s;
}

JitCacheSettings JitCacheSettingsFromEnv() {
  return ReadJitCacheSettings(std::getenv("CUDA_CACHE_DISABLE"), std::getenv("CUDA_CACHE_MAXSIZE"),
                              std::getenv("CUDA_CACHE_PATH"), std::getenv("HOME"));
}

std::vector<std::string> JitCacheAdvice(const JitCacheSettings& s, uint64_t jit_bytes,
                                        bool writable) {
  std::vector<std::string> advice;
  if (s.disabled) {
    advice.push_back(
        "CUDA_CACHE_DISABLE=1: the JIT cache is off, so every process start compiles the PTX "
        "again; unset CUDA_CACHE_DISABLE");
    return advice;
  }
  if (!s.max_bytes_valid)
    advice.push_back("CUDA_CACHE_MAXSIZE='" + s.maxsize_env +
                     "' is not a byte count; set it to an integer such as " +
                     std::to_string(kJitCacheDefaultBytes));
  if (s.max_bytes_valid && s.max_bytes == 0)
    advice.push_back("CUDA_CACHE_MAXSIZE=0 leaves no room for JIT output; unset it or set it to " +
                     std::to_string(kJitCacheDefaultBytes));
  else if (s.max_bytes_valid && jit_bytes > s.max_bytes)
    advice.push_back("the JIT output (about " + Bytes(jit_bytes) + ") does not fit " +
                     "CUDA_CACHE_MAXSIZE=" + std::to_string(s.max_bytes) +
                     ", so it is compiled again at every start; set CUDA_CACHE_MAXSIZE to at "
                     "least " +
                     std::to_string(jit_bytes < kJitCacheMaxBytes ? jit_bytes * 2 : jit_bytes) +
                     " (at most " + std::to_string(kJitCacheMaxBytes) + ")");
  else if (s.max_bytes_valid && jit_bytes > s.max_bytes / 2)
    advice.push_back("the JIT output (about " + Bytes(jit_bytes) + ") takes over half of the " +
                     Bytes(s.max_bytes) +
                     " cache, which other CUDA programs share, so it may be evicted; raise "
                     "CUDA_CACHE_MAXSIZE (at most " +
                     std::to_string(kJitCacheMaxBytes) + ")");
  if (!writable)
    advice.push_back("the JIT cache folder '" + s.path +
                     "' is not writable, so JIT output is not kept; set CUDA_CACHE_PATH to a "
                     "writable folder");
  return advice;
}

bool CacheFolderWritable(const std::string& path) {
  std::string p = path;
  while (!p.empty()) {
    if (access(p.c_str(), F_OK) == 0) return access(p.c_str(), W_OK | X_OK) == 0;
    auto slash = p.find_last_of('/');
    if (slash == std::string::npos) return access(".", W_OK | X_OK) == 0;
    p = slash == 0 ? "/" : p.substr(0, slash);
    if (p == "/") return access("/", W_OK | X_OK) == 0;
  }
  return false;
}

}  // namespace kiln::cuda
