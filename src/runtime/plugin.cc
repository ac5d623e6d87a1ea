#include "runtime/plugin.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "runtime/plugin_abi.h"
#include "runtime/plugin_deps.h"

namespace kiln::runtime {

namespace {

struct Loaded {
  Status status;
  std::string path;
  PluginDependencyReport deps;
};

std::mutex& LoadMutex() {
  static auto* m = new std::mutex();
  return *m;
}
std::map<Backend, Loaded>& LoadedModules() {
  static auto* m = new std::map<Backend, Loaded>();
  return *m;
}

// A backend name that may be part of a file name: no '/', no "..".
bool PlainName(const std::string& name) {
  if (name.empty() || name.size() > 32) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

// The folder of the binary holding this code: the program when kiln is linked statically (dladdr
// names it as it was started, so /proc/self/exe is used), else the shared library's own path.
std::string OwnFolder() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::canonical("/proc/self/exe", ec);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&OwnFolder), &info) != 0 && info.dli_fname != nullptr) {
    std::error_code ec2;
    const std::filesystem::path own = std::filesystem::canonical(info.dli_fname, ec2);
    if (!ec2 && own != exe) return own.parent_path().string();
  }
  return ec ? "" : exe.parent_path().string();
}

}  // namespace

Status CheckPluginAbi(const std::string& path) {
  auto stamp = ReadElfSection(path, ".kiln_plugin_abi");
  const std::string mine = PluginAbiText();
  if (!stamp.ok())
    return Status(StatusCode::kUnavailable, "refusing backend plugin " + path +
                                                ": it carries no kiln ABI stamp (" +
                                                stamp.status().message() + "); this kiln needs '" +
                                                mine + "': use the plugin built with this kiln");
  const std::string theirs(stamp->c_str());  // the section holds one NUL-terminated string
  if (theirs != mine)
    return Status(StatusCode::kUnavailable,
                  "refusing backend plugin " + path + ": it was built for '" + theirs +
                      "', this kiln is '" + mine + "'; use the plugin built with this kiln");
  return OkStatus();
}

std::vector<std::string> PluginSearchPath() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("KILN_PLUGIN_PATH")) dirs = SplitSearchPath(env);
  const std::string own = OwnFolder();
  if (!own.empty()) {
    dirs.push_back(own);
    dirs.push_back(own + "/../lib");  // a release: bin/kiln and lib/libkiln_<backend>.so
    dirs.push_back(own + "/../lib/kiln");
  }
#ifdef KILN_PLUGIN_BUILD_DIR
  dirs.push_back(KILN_PLUGIN_BUILD_DIR);
#endif
  std::vector<std::string> unique;
  for (const std::string& d : dirs) {
    const std::string n = std::filesystem::path(d).lexically_normal().string();
    if (std::find(unique.begin(), unique.end(), n) == unique.end()) unique.push_back(n);
  }
  return unique;
}

std::string FindBackendPlugin(Backend backend) {
  const std::string name = BackendName(backend);
  if (!PlainName(name)) return "";
  const std::string file = "libkiln_" + name + ".so";
  for (const std::string& d : PluginSearchPath()) {
    std::error_code ec;
    const std::filesystem::path p = std::filesystem::path(d) / file;
    if (std::filesystem::is_regular_file(p, ec))
      return std::filesystem::weakly_canonical(p, ec).string();
  }
  return "";
}

Status LoadBackendPlugin(Backend backend) {
  const std::string name = BackendName(backend);
  if (!PlainName(name))
    return InvalidArgument("backend name '" + name +
                           "' cannot name a plugin file (lower-case letters, digits and '_')");
  std::lock_guard<std::mutex> lock(LoadMutex());
  auto it = LoadedModules().find(backend);
  if (it != LoadedModules().end()) return it->second.status;
  Loaded loaded;
  const std::string path = FindBackendPlugin(backend);
  if (path.empty()) {
    std::string searched;
    for (const std::string& d : PluginSearchPath()) searched += (searched.empty() ? "" : ", ") + d;
    loaded.status = Status(StatusCode::kNotFound, "backend plugin libkiln_" + name +
                                                      ".so not found; searched: " + searched +
                                                      " (set KILN_PLUGIN_PATH to its folder)");
  } else if (Status abi = CheckPluginAbi(path); !abi.ok()) {
    loaded.status = abi;
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    loaded.deps = PreloadPluginDependencies(backend, path);
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    loaded.deps.load_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (handle == nullptr) {
      const char* err = dlerror();
      std::string missing;
      for (const PluginDependency& d : loaded.deps.libs)
        if (d.path.empty()) missing += (missing.empty() ? "" : ", ") + d.soname;
      std::string searched;
      for (const std::string& d : loaded.deps.searched)
        searched += (searched.empty() ? "" : ", ") + d;
      loaded.status = Status(
          StatusCode::kUnavailable,
          "cannot load backend plugin " + path + ": " + (err ? err : "unknown dlopen error") +
              (missing.empty()
                   ? std::string()
                   : "; not found: " + missing +
                         " (looked in the system loader's "
                         "path" +
                         (searched.empty() ? "" : " and " + searched) + "; " + loaded.deps.env_var +
                         " adds folders; `kiln doctor` shows the search)"));
    } else {
      loaded.path = path;
    }
  }
  LoadedModules()[backend] = loaded;
  return loaded.status;
}

std::string LoadedBackendPlugin(Backend backend) {
  std::lock_guard<std::mutex> lock(LoadMutex());
  auto it = LoadedModules().find(backend);
  return it == LoadedModules().end() ? "" : it->second.path;
}

PluginDependencyReport LoadedPluginDependencies(Backend backend) {
  std::lock_guard<std::mutex> lock(LoadMutex());
  auto it = LoadedModules().find(backend);
  return it == LoadedModules().end() ? PluginDependencyReport{} : it->second.deps;
}

}  // namespace kiln::runtime
