// The text form of `kiln doctor`: one section per subject, a line per fact, and every finding that
// limits what kiln can do repeated at the end as a WARNING line.
#include <cstdio>
#include <string>

#include "doctor.h"

namespace kiln::cli {
namespace {

using Json = nlohmann::ordered_json;

std::string Str(const Json& v, const std::string& fallback = "unknown") {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return fallback;
  return v.dump();
}

void Line(const char* key, const std::string& value) {
  std::printf("  %-14s %s\n", key, value.c_str());
}

// Space-separated; built with += (GCC 12 warns falsely on "literal" + std::string&&).
std::string Joined(const Json& list, const char* prefix) {
  std::string s;
  for (const Json& a : list) {
    if (!s.empty()) s += ' ';
    s += prefix;
    s += a.is_string() ? a.get<std::string>() : a.dump();
  }
  return s;
}

std::string Archs(const Json& list, const char* prefix) {
  std::string s = Joined(list, prefix);
  return s.empty() ? "none" : s;
}

std::string Size(uint64_t b) {
  char buf[64];
  if (b >= (1ull << 30))
    std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(b) / (1ull << 30));
  else if (b >= (1ull << 20))
    std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(b) / (1ull << 20));
  else
    std::snprintf(buf, sizeof(buf), "%.1f KiB", static_cast<double>(b) / (1ull << 10));
  return buf;
}

std::string LibraryLine(const Json& l) {
  std::string s = Str(l["soname"]) + ": ";
  if (!l["loaded"].get<bool>()) return s + "NOT FOUND (" + Str(l["error"], "") + ")";
  s += Str(l["version"], "version unknown");
  if (l["path"].is_string()) s += " at " + Str(l["path"]);
  if (l["compiled"].is_string()) s += "; compiled against " + Str(l["compiled"]);
  if (l["error"].is_string()) s += "; " + Str(l["error"]);
  return s;
}

std::string EnvValue(const Json& v, const std::string& when_unset) {
  if (!v.is_string()) return "unset (" + when_unset + ")";
  std::string s = "'";
  s += v.get<std::string>();
  s += '\'';
  return s;
}

}  // namespace

void PrintDoctorReport(const Json& r) {
  const Json& b = r["build"];
  std::printf("kiln doctor\n\nBuild\n");
  Line("kiln", Str(b["kiln_version"]) + " (" + Str(b["build_type"]) + ")");
  Line("compiler", Str(b["compiler"]));
  Line("oneDNN", Str(b["onednn_version"], "not linked"));
  if (b["cuda_enabled"].get<bool>()) {
    Line("CUDA", "compiled in: toolkit " + Str(b["cuda_toolkit"]) + ", runtime " +
                     Str(b["cudart_compiled"]) + " (" + Str(b["cudart_linkage"]) + "), cuDNN " +
                     Str(b["cudnn_compiled"], "headers absent") + ", cuBLAS " +
                     Str(b["cublas_compiled"], "headers absent"));
    Line("CUDA archs", Str(b["cuda_architectures"]));
  } else {
    Line("CUDA", "NOT compiled in (CPU-only build)");
  }

  const Json& c = r["cpu"];
  std::printf("\nCPU\n");
  Line("model", Str(c["model"]));
  Line("cores", c["physical_cores"].dump() + " physical, " + c["logical_cpus"].dump() + " logical");
  if (c.contains("usable_cpus")) {
    const double quota = c["cgroup_quota_cpus"].get<double>();
    char q[96] = "none";
    if (quota > 0) std::snprintf(q, sizeof(q), "%.2f CPUs", quota);
    Line("this process", "may use " + c["usable_cpus"].dump() + " (affinity mask " +
                             c["affinity_cpus"].dump() + " CPUs, cgroup quota " + q +
                             (quota > 0 ? " from " + Str(c["cgroup_quota_source"]) : "") + ")");
    Line("threads", c["default_threads"].dump() + " by default (" +
                        Str(c["default_threads_reason"]) + "; --threads overrides)");
  }
  const std::string isa = Joined(c["isa"], "");
  Line("ISA", isa.empty() ? "none of avx/avx2/avx512/amx" : isa);
  Line("oneDNN ISA", Str(c["onednn_isa"], "not linked"));
  Line("bf16", c["bf16"].get<bool>() ? "yes (--precision bf16 runs natively)"
                                     : "no (--precision bf16 is refused)");
  {
    const std::string i8 = Str(c["int8"], "none");
    Line("int8", i8 == "none" ? "no int8 instructions (QDQ models run on reference kernels)"
                 : i8.find("no VNNI") != std::string::npos
                     ? i8 + ": int8 convolutions with weights halved against saturation"
                     : i8 + ": native int8 dot products");
  }

  const Json& cu = r["cuda"];
  const Json& d = cu["driver"];
  std::printf("\nCUDA\n");
  if (!d["loaded"].get<bool>()) {
    Line("driver", "NOT FOUND: " + Str(d["error"], "libcuda.so.1 not loadable"));
  } else {
    std::string s = "CUDA " + Str(d["version"]) + " at " + Str(d["path"]);
    if (d["init_error"].is_string()) s += "; " + Str(d["init_error"]);
    Line("driver", s);
  }
  if (cu["library_search"].is_object()) {
    const Json& ls = cu["library_search"];
    for (const Json& l : ls["libs"])
      Line("plugin needs",
           Str(l["soname"]) + ": " +
               (l["path"].is_string() ? Str(l["path"]) + " (" + Str(l["found_by"]) + ")"
                                      : "NOT FOUND (" + Str(l["error"], "") + ")"));
    std::string searched = "system loader";
    for (const Json& d : ls["searched"]) searched += ", " + Str(d);
    Line("  searched", searched + " (" + Str(ls["env_var"]) + " adds folders first)");
  }
  Line("runtime", LibraryLine(cu["libraries"]["cudart"]));
  Line("cuDNN", LibraryLine(cu["libraries"]["cudnn"]));
  Line("cuBLAS", LibraryLine(cu["libraries"]["cublas"]));

  const Json& bin = cu["binary"];
  const std::string holder = bin["holder"] == "cuda_plugin" ? "CUDA plugin" : "kiln's binary";
  if (bin["error"].is_string()) {
    Line(holder.c_str(), "cannot read: " + Str(bin["error"]));
  } else {
    Line(holder.c_str(), Str(bin["path"]));
    Line("  SASS", Archs(bin["sass"], "sm_"));
    Line("  PTX", Archs(bin["ptx"], "compute_"));
    if (!bin["sass"].empty() || !bin["ptx"].empty())
      Line("  fatbin", bin["containers"].dump() + " container(s), " +
                           std::to_string(bin["entries"].size()) +
                           " entries; PTX JIT output about " +
                           Size(bin["estimated_jit_bytes"].get<uint64_t>()));
  }

  const Json& jc = cu["jit_cache"];
  Line("JIT cache", std::string(jc["disabled"].get<bool>() ? "DISABLED" : "enabled") + ", " +
                        (jc["max_bytes"].is_null() ? std::string("size invalid")
                                                   : Size(jc["max_bytes"].get<uint64_t>())) +
                        ", " + Str(jc["path"]) +
                        (jc["writable"].get<bool>() ? " (writable)" : " (NOT writable)"));
  Line("", "CUDA_CACHE_DISABLE " + EnvValue(jc["CUDA_CACHE_DISABLE"], "cache on"));
  Line("", "CUDA_CACHE_MAXSIZE " + EnvValue(jc["CUDA_CACHE_MAXSIZE"], "1 GiB default"));
  Line("", "CUDA_CACHE_PATH " + EnvValue(jc["CUDA_CACHE_PATH"], "~/.nv/ComputeCache"));

  if (cu["gpus"].empty()) Line("GPUs", "none visible");
  for (const Json& g : cu["gpus"]) {
    Line(("GPU " + g["index"].dump()).c_str(),
         Str(g["name"]) + ", " + Size(g["memory_bytes"].get<uint64_t>()) + ", compute capability " +
             Str(g["compute_capability"]));
    Line("  verdict", Str(g["explanation"]));
    for (const Json& a : g["jit_cache_advice"]) Line("  advice", a.get<std::string>());
  }
  if (b["cuda_enabled"].get<bool>())
    Line("note", cu["execution_available"].get<bool>()
                     ? "--device cuda is available; kiln's CUDA backend has not yet been run on a "
                       "GPU by its developers: run `kiln selftest` first, it checks every kernel"
                     : "--device cuda needs a visible GPU; on one, run `kiln selftest` first");

  if (!r["warnings"].empty()) std::printf("\n");
  for (const Json& w : r["warnings"]) std::printf("WARNING: %s\n", w.get<std::string>().c_str());
}

}  // namespace kiln::cli
