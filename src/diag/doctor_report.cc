// DoctorReportJson() and DescribeCpu() (kiln/diagnostics.h), what `kiln doctor` prints: what this
// kiln was built with and what it finds on this machine:
// build flags, the CPU and its ISA, and for CUDA the driver, the runtime/cuDNN/cuBLAS versions
// loaded against those compiled in, each GPU, and the SASS/PTX architectures in kiln's own binary
// (read from its .nv_fatbin section, no cuobjdump needed), with a verdict per GPU: native, or PTX
// JIT needed (then the JIT cache settings and advice). Everything is discovered at run time
// (dlopen), so a missing driver, library or GPU is a fact to report, not an error. The facts are
// gathered once into a JSON object; the CLI prints its text report from it (tools/kiln/
// doctor_text.cc), so the two never disagree.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/onednn_common.h"
#include "backends/cuda/cuda_probe.h"
#include "backends/cuda/fatbin.h"
#include "backends/cuda/gpu_compat.h"
#include "core/cpu_info.h"
#include "core/threading.h"
#include "kiln/diagnostics.h"
#include "runtime/plugin.h"
#ifdef KILN_CUDA_ENABLED
#include "backends/cuda/build_info.h"
#endif

#ifndef KILN_VERSION_STRING
#define KILN_VERSION_STRING "unknown"
#endif
#ifndef KILN_BUILD_TYPE
#define KILN_BUILD_TYPE "unknown"
#endif

namespace kiln {
namespace {

using Json = nlohmann::ordered_json;

std::string Compiler() {
#if defined(__clang__)
  return "Clang " __clang_version__;
#elif defined(__GNUC__)
  return "GCC " __VERSION__;
#else
  return "unknown";
#endif
}

// Versions this build was compiled against, 0 when unknown or CUDA is off.
struct Compiled {
  int cudart = 0, cudnn = 0, cublas = 0;
};

Compiled CompiledVersions() {
  Compiled c;
#ifdef KILN_CUDA_ENABLED
  const cuda::CudaBuildInfo info = cuda::GetCudaBuildInfo();
  c.cudart = info.cudart_version;
  c.cudnn = info.cudnn_version;
  c.cublas = info.cublas_version;
#endif
  return c;
}

Json Build() {
  Json b;
  b["kiln_version"] = KILN_VERSION_STRING;
  b["compiler"] = Compiler();
  b["build_type"] = KILN_BUILD_TYPE;
  b["onednn_version"] = DescribeCpu().onednn_version;
#ifdef KILN_CUDA_ENABLED
  const cuda::CudaBuildInfo info = cuda::GetCudaBuildInfo();
  b["cuda_enabled"] = true;
  b["cuda_toolkit"] = KILN_CUDA_TOOLKIT_VERSION;
  b["cuda_architectures"] = info.architectures;
  b["cudart_compiled"] = cuda::CudaVersionText(info.cudart_version);
  b["cudart_linkage"] = info.cudart_static ? "static" : "shared";
  b["cudnn_compiled"] =
      info.cudnn_version ? Json(cuda::CudnnVersionText(info.cudnn_version)) : Json();
  b["cublas_compiled"] =
      info.cublas_version ? Json(cuda::CublasVersionText(info.cublas_version)) : Json();
#else
  b["cuda_enabled"] = false;
  b["cuda_toolkit"] = nullptr;
  b["cuda_architectures"] = nullptr;
  b["cudart_compiled"] = nullptr;
  b["cudart_linkage"] = nullptr;
  b["cudnn_compiled"] = nullptr;
  b["cublas_compiled"] = nullptr;
#endif
  return b;
}

const char* OneDnnIsaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

Json Cpu() {
  const CpuDescription& d = DescribeCpu();
  Json c;
  c["model"] = d.model;
  c["physical_cores"] = d.physical_cores;
  c["logical_cpus"] = d.logical_cpus;
  c["affinity_cpus"] = d.affinity_cpus;
  c["cgroup_quota_cpus"] = d.cgroup_quota_cpus;
  c["cgroup_quota_source"] = d.quota_source;
  c["usable_cpus"] = d.usable_cpus;
  c["default_threads"] = d.default_threads;
  c["default_threads_reason"] = d.default_threads_reason;
  c["isa"] = d.isa;
  c["onednn_isa"] = d.onednn_isa;
  c["bf16"] = d.bf16;
  c["int8"] = d.int8;
  return c;
}

Json Library(const cuda::LibraryProbe& p, const Json& compiled) {
  Json j;
  j["soname"] = p.soname;
  j["loaded"] = p.loaded;
  j["path"] = p.path.empty() ? Json() : Json(p.path);
  j["version"] = p.version_text.empty() ? Json() : Json(p.version_text);
  j["compiled"] = compiled;
  j["error"] = p.error.empty() ? Json() : Json(p.error);
  return j;
}

std::string ExePath() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "/proc/self/exe";
  buf[n] = '\0';
  return buf;
}

// The GPU code shipped with kiln: in a CUDA build, the fatbin of the CUDA plugin
// (libkiln_cuda.so, found as `--device cuda` would find it); in a CPU-only build, kiln's own
// binary (which has none).
Json Binary(bool enabled, cuda::EmbeddedCode* code) {
  Json j;
  const std::string path = enabled ? runtime::FindBackendPlugin(Backend::kCuda) : ExePath();
  j["path"] = path;
  j["holder"] = enabled ? "cuda_plugin" : "program";
  if (path.empty()) {
    std::string searched;
    for (const std::string& d : runtime::PluginSearchPath())
      searched += (searched.empty() ? "" : ", ") + d;
    j["path"] = nullptr;
    j["error"] = "the CUDA plugin libkiln_cuda.so was not found (searched " + searched +
                 "; KILN_PLUGIN_PATH adds folders)";
    j["sass"] = Json::array();
    j["ptx"] = Json::array();
    return j;
  }
  auto read = cuda::ReadEmbeddedCode(enabled ? path : "/proc/self/exe");
  if (!read.ok()) {
    j["error"] = read.status().ToString();
    j["sass"] = Json::array();
    j["ptx"] = Json::array();
    return j;
  }
  *code = std::move(*read);
  j["error"] = nullptr;
  j["sass"] = code->sass;
  j["ptx"] = code->ptx;
  j["containers"] = code->containers.size();
  j["estimated_jit_bytes"] = code->estimated_jit_bytes;
  Json entries = Json::array();
  for (const auto& c : code->containers) {
    for (const auto& e : c.entries) {
      Json je;
      je["kind"] = e.is_ptx()   ? "ptx"
                   : e.is_elf() ? "sass"
                                : "other(" + std::to_string(e.kind) + ")";
      je["arch"] = e.arch;
      je["code_version"] = std::to_string(e.code_major) + "." + std::to_string(e.code_minor);
      je["header_bytes"] = e.header_bytes;
      je["payload_bytes"] = e.payload_bytes;
      je["compressed"] = e.compressed();
      entries.push_back(je);
    }
  }
  j["entries"] = entries;
  return j;
}

Json JitCache(const cuda::JitCacheSettings& s) {
  Json j;
  auto raw = [](const std::string& v) { return v.empty() ? Json() : Json(v); };
  j["CUDA_CACHE_DISABLE"] = raw(s.disable_env);
  j["CUDA_CACHE_MAXSIZE"] = raw(s.maxsize_env);
  j["CUDA_CACHE_PATH"] = raw(s.path_env);
  j["disabled"] = s.disabled;
  j["max_bytes"] = s.max_bytes_valid ? Json(s.max_bytes) : Json();
  j["path"] = s.path;
  j["writable"] = cuda::CacheFolderWritable(s.path);
  return j;
}

// The driver and its GPUs; loud findings go to `warnings`.
Json Driver(const cuda::DriverProbe& driver, bool enabled, const Compiled& compiled,
            Json* warnings) {
  Json d = Library(driver.library, Json());
  d.erase("compiled");
  d["initialized"] = driver.initialized;
  d["init_error"] = driver.init_error.empty() ? Json() : Json(driver.init_error);
  if (!driver.library.loaded) {
    warnings->push_back(
        "no NVIDIA driver found (libcuda.so.1 not loadable): GPU execution unavailable");
  } else if (!driver.initialized) {
    warnings->push_back("NVIDIA driver found but not usable (" + driver.init_error +
                        "): GPU execution unavailable");
  } else if (driver.gpus.empty()) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    warnings->push_back(std::string("NVIDIA driver loaded but no GPU visible") +
                        (visible ? " (CUDA_VISIBLE_DEVICES='" + std::string(visible) + "')" : "") +
                        ": GPU execution unavailable");
  }
  const int version = driver.library.version;
  if (enabled && version > 0 && version / 1000 < compiled.cudart / 1000)
    warnings->push_back("the driver supports CUDA " + driver.library.version_text +
                        ", older than the CUDA " + cuda::CudaVersionText(compiled.cudart) +
                        " kiln was built with: update the NVIDIA driver");
  else if (enabled && version > 0 && version < compiled.cudart)
    warnings->push_back("the driver supports CUDA " + driver.library.version_text + ", kiln was " +
                        "built with " + cuda::CudaVersionText(compiled.cudart) +
                        ": SASS runs (minor version compatibility) but PTX JIT may fail");
  return d;
}

// Where the CUDA plugin's own dependencies (cuDNN, cuBLAS) were looked for and found.
Json LibrarySearch(const std::string& plugin, Json* warnings) {
  const runtime::PluginDependencyReport r =
      runtime::PreloadPluginDependencies(Backend::kCuda, plugin);
  Json j;
  j["env_var"] = r.env_var;
  j["searched"] = r.searched;
  j["error"] = r.error.empty() ? Json() : Json(r.error);
  Json libs = Json::array();
  for (const runtime::PluginDependency& d : r.libs) {
    Json l;
    l["soname"] = d.soname;
    l["path"] = d.path.empty() ? Json() : Json(d.path);
    l["found_by"] = d.how.empty() ? Json() : Json(d.how);
    l["error"] = d.error.empty() ? Json() : Json(d.error);
    libs.push_back(l);
    if (d.path.empty())
      warnings->push_back("the CUDA plugin needs " + d.soname + ", found nowhere (" + d.error +
                          "): set " + r.env_var + " to its folder");
  }
  j["libs"] = libs;
  if (!r.error.empty())
    warnings->push_back("cannot read the CUDA plugin's dependencies: " + r.error);
  return j;
}

// The runtime, cuDNN and cuBLAS, by the major versions this build expects (CUDA 13 and cuDNN 9
// in a CPU-only build).
Json Libraries(const Json& build, bool enabled, const Compiled& compiled, Json* warnings) {
  auto soname = [](const char* lib, int major) { return std::string(lib) + std::to_string(major); };
  const cuda::LibraryProbe cudart = cuda::ProbeCudaRuntime(
      soname("libcudart.so.", compiled.cudart ? compiled.cudart / 1000 : 13));
  const cuda::LibraryProbe cudnn =
      cuda::ProbeCudnn(soname("libcudnn.so.", compiled.cudnn ? compiled.cudnn / 10000 : 9));
  const cuda::LibraryProbe cublas =
      cuda::ProbeCublas(soname("libcublas.so.", compiled.cublas ? compiled.cublas / 10000 : 13));
  Json libs;
  libs["cudart"] = Library(cudart, build["cudart_compiled"]);
  libs["cudnn"] = Library(cudnn, build["cudnn_compiled"]);
  libs["cublas"] = Library(cublas, build["cublas_compiled"]);
  const std::pair<const cuda::LibraryProbe*, int> checks[] = {{&cudnn, compiled.cudnn},
                                                              {&cublas, compiled.cublas}};
  for (const auto& [lib, want] : checks) {
    if (!enabled || want == 0) continue;
    if (!lib->loaded)
      warnings->push_back(lib->soname + " not loadable: the GPU kernels that need it will fail");
    else if (lib->version > 0 && lib->version < want)
      warnings->push_back(lib->soname + " " + lib->version_text +
                          " is loaded, older than the version kiln was compiled against");
  }
  return libs;
}

// One entry per GPU with its verdict and, when it needs PTX JIT, the JIT cache advice.
Json Gpus(const std::vector<cuda::GpuInfo>& gpus, bool enabled, const cuda::EmbeddedCode& code,
          const cuda::JitCacheSettings& cache, bool cache_writable, Json* warnings) {
  Json out = Json::array();
  for (const cuda::GpuInfo& g : gpus) {
    Json jg;
    jg["index"] = g.index;
    jg["name"] = g.name;
    jg["memory_bytes"] = g.memory_bytes;
    jg["compute_capability"] = std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor);
    const cuda::GpuVerdict v = cuda::JudgeGpu(g.cc_major, g.cc_minor, code.sass, code.ptx);
    jg["verdict"] = enabled ? cuda::VerdictName(v.verdict) : "cpu_only_build";
    jg["sass_arch"] = v.sass_arch ? Json(v.sass_arch) : Json();
    jg["ptx_arch"] = v.ptx_arch ? Json(v.ptx_arch) : Json();
    jg["explanation"] = enabled ? v.explanation : "kiln was built without CUDA";
    Json advice = Json::array();
    if (enabled && v.verdict == cuda::Verdict::kPtxJit)
      for (const std::string& a :
           cuda::JitCacheAdvice(cache, code.estimated_jit_bytes, cache_writable))
        advice.push_back(a);
    jg["jit_cache_advice"] = advice;
    if (enabled && v.verdict != cuda::Verdict::kNative)
      warnings->push_back("GPU " + std::to_string(g.index) + " (" + g.name + "): " + v.explanation);
    out.push_back(jg);
  }
  return out;
}

// The CUDA section; appends loud one-line findings to `warnings`.
Json Cuda(const Json& build, Json* warnings) {
  Json j;
  const bool enabled = build["cuda_enabled"].get<bool>();
  const Compiled compiled = CompiledVersions();
  if (!enabled)
    warnings->push_back(
        "kiln was built without CUDA (KILN_WITH_CUDA=OFF or no toolkit found): CPU only");
  const cuda::DriverProbe driver = cuda::ProbeDriver();
  j["driver"] = Driver(driver, enabled, compiled, warnings);
  cuda::EmbeddedCode code;
  j["binary"] = Binary(enabled, &code);
  const bool plugin_found = !j["binary"]["path"].is_null();
  // The plugin's cuDNN/cuBLAS are looked for (and opened) as `--device cuda` would before the
  // probes below, so they report what a run would use.
  j["library_search"] =
      plugin_found ? LibrarySearch(j["binary"]["path"].get<std::string>(), warnings) : Json();
  j["libraries"] = Libraries(build, enabled, compiled, warnings);

  if (!j["binary"]["error"].is_null())
    warnings->push_back("cannot read kiln's GPU code: " + j["binary"]["error"].get<std::string>());
  else if (enabled && code.sass.empty() && code.ptx.empty())
    warnings->push_back("the CUDA plugin carries no GPU code (.nv_fatbin missing)");

  const cuda::JitCacheSettings cache = cuda::JitCacheSettingsFromEnv();
  j["jit_cache"] = JitCache(cache);
  j["gpus"] =
      Gpus(driver.gpus, enabled, code, cache, j["jit_cache"]["writable"].get<bool>(), warnings);
  // `--device cuda` can run here: a CUDA build and at least one visible GPU. (The backend has
  // been compiled and CPU-tested, not yet run on a GPU: the text report says so.)
  j["execution_available"] = enabled && plugin_found && !j["gpus"].empty();
  return j;
}

}  // namespace

const CpuDescription& DescribeCpu() {
  static const CpuDescription d = [] {
    CpuDescription c;
    const CpuInfo& info = GetCpuInfo();
    c.model = info.model;
    c.physical_cores = info.physical_cores;
    c.logical_cpus = info.logical_cpus;
    const CpuLimits& limits = GetCpuLimits();
    c.affinity_cpus = limits.affinity_cpus;
    c.cgroup_quota_cpus = limits.quota_cpus;
    c.quota_source = limits.quota_source;
    c.usable_cpus = limits.usable_cpus;
    c.default_threads = limits.default_threads;
    c.default_threads_reason = limits.default_reason;
    c.isa =
        info.Has({"avx", "fma", "f16c", "avx2", "avx_vnni", "avx512f", "avx512bw", "avx512vl",
                  "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"});
    c.onednn_isa = OneDnnIsaName(dnnl::get_effective_cpu_isa());
    const dnnl_version_t* v = dnnl_version();
    c.onednn_version =
        std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
    c.bf16 = backends::cpu::Bf16Supported();
    auto has = [&](const char* f) { return !info.Has({f}).empty(); };
    // What oneDNN's int8 convolutions use: the CPU's flags as far as oneDNN's effective ISA goes
    // (DNNL_MAX_CPU_ISA may cap it below the CPU's, and kiln's int8 kernels follow oneDNN).
    using Isa = dnnl::cpu_isa;
    const Isa eff = dnnl::get_effective_cpu_isa();
    const bool vnni = backends::cpu::Int8Vnni();
    c.int8 = eff == Isa::avx512_core_amx && has("amx_int8")        ? "amx_int8"
             : vnni && eff != Isa::avx2_vnni && has("avx512_vnni") ? "avx512_vnni"
             : vnni                                                ? "avx_vnni"
             : eff == Isa::avx512_core && has("avx512bw")          ? "avx512 (no VNNI)"
             : eff != Isa::sse41 && eff != Isa::avx && has("avx2") ? "avx2 (no VNNI)"
                                                                   : "none";
    return c;
  }();
  return d;
}

std::string DoctorReportJson() {
  Json report;
  Json warnings = Json::array();
  report["build"] = Build();
  report["cpu"] = Cpu();
  report["cuda"] = Cuda(report["build"], &warnings);
  report["warnings"] = warnings;
  return report.dump(2);
}

}  // namespace kiln
