// See plugin_deps.h. The ELF reader reads the program headers, the PT_DYNAMIC segment and the
// dynamic string table (found through the PT_LOAD segment that maps DT_STRTAB), nothing else.
#include "runtime/plugin_deps.h"

#include <dlfcn.h>
#include <elf.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

namespace kiln::runtime {

namespace fs = std::filesystem;

bool PluginDependencyReport::ok() const {
  return error.empty() && std::all_of(libs.begin(), libs.end(),
                                      [](const PluginDependency& d) { return !d.path.empty(); });
}

namespace {

bool ReadAt(std::ifstream& f, uint64_t offset, void* dst, size_t bytes) {
  f.seekg(static_cast<std::streamoff>(offset));
  f.read(static_cast<char*>(dst), static_cast<std::streamsize>(bytes));
  return static_cast<size_t>(f.gcount()) == bytes;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// Libraries of the C and C++ runtimes (always there), the sanitizer runtimes of a sanitized build
// (loaded with the program) and libkiln itself (the plugin needs the libkiln.so that is opening
// it): never looked for.
bool IsSystemLibrary(const std::string& soname) {
  static const char* const kPrefixes[] = {
      "libc.so",      "libm.so",     "libdl.so",   "libpthread.so", "librt.so",
      "libstdc++.so", "libgcc_s.so", "ld-linux",   "libresolv.so",  "libkiln.so",
      "libasan.so",   "libubsan.so", "liblsan.so", "libtsan.so"};
  for (const char* p : kPrefixes)
    if (soname.rfind(p, 0) == 0) return true;
  return false;
}

void AddExisting(const fs::path& dir, std::vector<std::string>* out) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  const std::string s = fs::weakly_canonical(dir, ec).string();
  if (!ec && std::find(out->begin(), out->end(), s) == out->end()) out->push_back(s);
}

// Children of `dir` whose names start with `prefix` (python3.11, python3.12, ...), sorted.
std::vector<fs::path> ChildrenStartingWith(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind(prefix, 0) == 0) out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<fs::path> SitePackages() {
  std::vector<fs::path> prefixes;  // folders holding lib/python3.*/site-packages
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (!Env(var).empty()) prefixes.emplace_back(Env(var));
  for (const std::string& dir : SplitSearchPath(Env("PATH"))) {
    std::error_code ec;
    if (fs::exists(fs::path(dir) / "python3", ec)) prefixes.push_back(fs::path(dir).parent_path());
  }
  const std::string home = Env("HOME");
  if (!home.empty()) prefixes.push_back(fs::path(home) / ".local");
  prefixes.emplace_back("/usr/local");
  std::vector<fs::path> sites;
  for (const std::string& p : SplitSearchPath(Env("PYTHONPATH"))) sites.emplace_back(p);
  for (const fs::path& prefix : prefixes)
    for (const fs::path& py : ChildrenStartingWith(prefix / "lib", "python3")) {
      sites.push_back(py / "site-packages");
      sites.push_back(py / "dist-packages");
    }
  sites.emplace_back("/usr/lib/python3/dist-packages");
  return sites;
}

std::string ExpandOrigin(const std::string& dir, const std::string& origin) {
  std::string out = dir;
  for (const char* token : {"$ORIGIN", "${ORIGIN}"}) {
    size_t pos;
    while ((pos = out.find(token)) != std::string::npos)
      out.replace(pos, std::strlen(token), origin);
  }
  return out;
}

// The name in a loader message "libX.so.N: cannot open shared object file", or "".
std::string MissingFromError(const std::string& error) {
  const size_t pos = error.find(": cannot open shared object file");
  if (pos == std::string::npos) return "";
  const size_t start = error.rfind(' ', pos);
  return error.substr(start == std::string::npos ? 0 : start + 1,
                      pos - (start == std::string::npos ? 0 : start + 1));
}

std::string LoadedPath(void* handle) {
  char buf[4096] = {0};
  if (handle != nullptr && dlinfo(handle, RTLD_DI_ORIGIN, buf) == 0) return buf;
  return "";
}

struct Candidate {
  std::string dir;
  std::string how;
};

// Opens `soname` from the first folder in `dirs` that has it; a dependency of it that the loader
// cannot find is opened from the same folder first (depth-limited).
bool OpenFrom(const std::string& soname, const std::vector<Candidate>& dirs, PluginDependency* dep,
              int depth = 0) {
  for (const Candidate& c : dirs) {
    const fs::path file = fs::path(c.dir) / soname;
    std::error_code ec;
    if (!fs::exists(file, ec)) continue;
    void* h = dlopen(file.c_str(), RTLD_NOW | RTLD_GLOBAL);
    for (int tries = 0; h == nullptr && depth < 4 && tries < 8; ++tries) {
      const char* e = dlerror();
      const std::string missing = MissingFromError(e ? e : "");
      PluginDependency sub;
      if (missing.empty() || missing == soname ||
          !OpenFrom(missing, {Candidate{c.dir, c.how}}, &sub, depth + 1)) {
        dep->error = std::string(e ? e : "unknown dlopen error");
        break;
      }
      h = dlopen(file.c_str(), RTLD_NOW | RTLD_GLOBAL);
    }
    if (h != nullptr) {
      dep->path = file.string();
      dep->how = c.how;
      dep->error.clear();
      return true;
    }
    if (dep->error.empty()) {
      const char* e = dlerror();
      dep->error = e ? e : "unknown dlopen error";
    }
  }
  return false;
}

}  // namespace

std::vector<std::string> SplitSearchPath(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = s.find(':', start);
    std::string part = s.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!part.empty()) out.push_back(part);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

StatusOr<ElfDynamicInfo> ReadElfDynamicInfo(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("cannot open " + path);
  Elf64_Ehdr eh{};
  if (!ReadAt(f, 0, &eh, sizeof(eh)) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
      eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > 256)
    return InvalidArgument(path + " is not a 64-bit little-endian ELF file");
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  if (!ReadAt(f, eh.e_phoff, ph.data(), ph.size() * sizeof(Elf64_Phdr)))
    return InvalidArgument(path + ": program headers run past the end of the file");
  const Elf64_Phdr* dyn = nullptr;
  for (const Elf64_Phdr& p : ph)
    if (p.p_type == PT_DYNAMIC) dyn = &p;
  ElfDynamicInfo info;
  if (dyn == nullptr) return info;  // a static executable needs nothing
  if (dyn->p_filesz > (1u << 20))
    return InvalidArgument(path + ": PT_DYNAMIC is implausibly large");
  std::vector<Elf64_Dyn> entries(dyn->p_filesz / sizeof(Elf64_Dyn));
  if (!ReadAt(f, dyn->p_offset, entries.data(), entries.size() * sizeof(Elf64_Dyn)))
    return InvalidArgument(path + ": PT_DYNAMIC runs past the end of the file");
  uint64_t strtab = 0, strsz = 0;
  std::vector<uint64_t> needed;
  int64_t runpath = -1, rpath = -1;
  for (const Elf64_Dyn& d : entries) {
    if (d.d_tag == DT_NULL) break;
    if (d.d_tag == DT_STRTAB) strtab = d.d_un.d_ptr;
    if (d.d_tag == DT_STRSZ) strsz = d.d_un.d_val;
    if (d.d_tag == DT_NEEDED) needed.push_back(d.d_un.d_val);
    if (d.d_tag == DT_RUNPATH) runpath = static_cast<int64_t>(d.d_un.d_val);
    if (d.d_tag == DT_RPATH) rpath = static_cast<int64_t>(d.d_un.d_val);
  }
  uint64_t strtab_offset = 0;
  bool mapped = false;
  for (const Elf64_Phdr& p : ph)
    if (p.p_type == PT_LOAD && strtab >= p.p_vaddr && strtab < p.p_vaddr + p.p_filesz) {
      strtab_offset = strtab - p.p_vaddr + p.p_offset;
      mapped = true;
    }
  if (!mapped || strsz == 0 || strsz > (16u << 20))
    return InvalidArgument(path + ": the dynamic string table is missing or not mapped");
  std::string strings(strsz, '\0');
  if (!ReadAt(f, strtab_offset, strings.data(), strsz))
    return InvalidArgument(path + ": the dynamic string table runs past the end of the file");
  auto str = [&](uint64_t off) -> std::string {
    if (off >= strings.size()) return "";
    return std::string(strings.c_str() + off);
  };
  for (uint64_t n : needed) info.needed.push_back(str(n));
  if (runpath >= 0)
    info.run_path = str(static_cast<uint64_t>(runpath));
  else if (rpath >= 0)
    info.run_path = str(static_cast<uint64_t>(rpath));
  return info;
}

StatusOr<std::string> ReadElfSection(const std::string& path, const std::string& name) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("cannot open " + path);
  Elf64_Ehdr eh{};
  if (!ReadAt(f, 0, &eh, sizeof(eh)) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
      eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum > 4096 ||
      eh.e_shstrndx >= eh.e_shnum)
    return InvalidArgument(path + " is not a 64-bit little-endian ELF file with sections");
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  if (!ReadAt(f, eh.e_shoff, sh.data(), sh.size() * sizeof(Elf64_Shdr)))
    return InvalidArgument(path + ": section headers run past the end of the file");
  const Elf64_Shdr& names = sh[eh.e_shstrndx];
  if (names.sh_size == 0 || names.sh_size > (1u << 20))
    return InvalidArgument(path + ": implausible section name table");
  std::string table(names.sh_size, '\0');
  if (!ReadAt(f, names.sh_offset, table.data(), table.size()))
    return InvalidArgument(path + ": section name table runs past the end of the file");
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_name >= table.size() || name != table.c_str() + s.sh_name) continue;
    if (s.sh_type == SHT_NOBITS || s.sh_size > 4096)
      return InvalidArgument(path + ": section " + name + " is empty or too large");
    std::string data(s.sh_size, '\0');
    if (!ReadAt(f, s.sh_offset, data.data(), data.size()))
      return InvalidArgument(path + ": section " + name + " runs past the end of the file");
    return data;
  }
  return NotFound(path + " has no section " + name);
}

std::vector<std::string> PythonWheelLibraryFolders(Backend backend) {
  std::vector<std::string> out;
  if (backend != Backend::kCuda) return out;
  for (const fs::path& site : SitePackages()) {
    // nvidia-cudnn-cu13: nvidia/cudnn/lib; CUDA 13's nvidia-cublas, nvidia-cuda-runtime:
    // nvidia/cu13/lib; older wheels: nvidia/cublas/lib, nvidia/cuda_runtime/lib.
    for (const fs::path& pkg : ChildrenStartingWith(site / "nvidia", ""))
      AddExisting(pkg / "lib", &out);
  }
  return out;
}

PluginDependencyReport PreloadPluginDependencies(Backend backend, const std::string& plugin_path) {
  PluginDependencyReport report;
  report.plugin = plugin_path;
  std::string upper = BackendName(backend);
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  const std::string env_name = "KILN_" + upper + "_LIBRARY_PATH";
  report.env_var = env_name;
  auto info = ReadElfDynamicInfo(plugin_path);
  if (!info.ok()) {
    report.error = info.status().message();
    return report;
  }
  std::vector<Candidate> before, after;  // folders tried before / after the system loader
  for (const std::string& d : SplitSearchPath(Env(env_name.c_str())))
    before.push_back({d, env_name});
  const std::string origin = fs::path(plugin_path).parent_path().string();
  for (const std::string& d : SplitSearchPath(info->run_path))
    after.push_back({ExpandOrigin(d, origin), "plugin run path"});
  for (const std::string& d : PythonWheelLibraryFolders(backend))
    after.push_back({d, "python wheel"});
  for (const auto* list : {&before, &after})
    for (const Candidate& c : *list)
      if (std::find(report.searched.begin(), report.searched.end(), c.dir) == report.searched.end())
        report.searched.push_back(c.dir);

  for (const std::string& soname : info->needed) {
    if (IsSystemLibrary(soname)) continue;
    PluginDependency dep;
    dep.soname = soname;
    if (!OpenFrom(soname, before, &dep)) {
      void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_GLOBAL);
      if (h != nullptr) {
        dep.path = LoadedPath(h) + "/" + soname;
        dep.how = "system";
        dep.error.clear();
      } else if (!OpenFrom(soname, after, &dep) && dep.error.empty()) {
        dep.error = "not found in the system loader's path nor in the folders searched";
      }
    }
    report.libs.push_back(dep);
  }
  return report;
}

}  // namespace kiln::runtime
