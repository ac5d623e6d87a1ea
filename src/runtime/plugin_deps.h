// Locating a backend plugin's shared-library dependencies before the plugin is opened.
//
// libkiln_cuda.so needs cuDNN and cuBLAS (DT_NEEDED entries), which a release does not bundle. A
// GPU server may have them in the system loader's path, in a folder the user names, or only inside
// the Python wheels PyTorch installed (site-packages/nvidia/<lib>/lib). The system loader finds
// only the first. So before the plugin is opened, each of its DT_NEEDED libraries is looked up in
// order and, where found outside the loader's path, opened by absolute path: once a library with
// that SONAME is loaded, the loader uses it for the plugin's DT_NEEDED entry.
//
// Order, per needed library:
//   1. each folder of $KILN_<BACKEND>_LIBRARY_PATH (colon-separated; KILN_CUDA_LIBRARY_PATH),
//   2. the system loader (dlopen by SONAME: LD_LIBRARY_PATH, the program's run path, ld.so.cache),
//   3. the plugin's own run path (DT_RUNPATH/DT_RPATH, $ORIGIN expanded),
//   4. for kCuda: the library folders of the NVIDIA Python wheels (nvidia-cudnn-cu13,
//      nvidia-cublas, ...) under every site-packages found: $VIRTUAL_ENV, $CONDA_PREFIX,
//      $PYTHONPATH, each python3 on $PATH (<bin>/../lib/python3*/site-packages),
//      /usr/local/lib/python3*/dist-packages, /usr/lib/python3/dist-packages and
//      ~/.local/lib/python3*/site-packages.
// A library whose own dependency is missing from the loader's path (libcublas.so.13 needs
// libcublasLt.so.13) has that dependency opened from its folder first.
//
// Libraries opened stay loaded for the life of the process. Not thread-safe on its own: the
// plugin loader calls it under its lock.
#pragma once

#include <string>
#include <vector>

#include "kiln/options.h"
#include "kiln/status.h"

namespace kiln::runtime {

struct PluginDependency {
  std::string soname;  // as the plugin's DT_NEEDED names it, e.g. "libcudnn.so.9"
  std::string path;    // the file opened (or already loaded); empty when not found
  std::string how;     // "KILN_CUDA_LIBRARY_PATH", "system", "plugin run path", "python wheel"
  std::string error;   // why it could not be opened; empty when it was
};

struct PluginDependencyReport {
  std::string plugin;                  // the plugin file read
  std::string env_var;                 // KILN_<BACKEND>_LIBRARY_PATH
  std::vector<std::string> searched;   // folders looked in beyond the system loader, in order
  std::vector<PluginDependency> libs;  // one per DT_NEEDED entry that is not a system library
  std::string error;                   // the plugin could not be read as an ELF file
  double load_ms = 0;                  // LoadBackendPlugin: these lookups plus the plugin's dlopen
  bool ok() const;                     // read, and every dependency found
};

// "a::b:" -> {"a", "b"}: the entries of a colon-separated search path, empty ones dropped.
std::vector<std::string> SplitSearchPath(const std::string& s);

// The DT_NEEDED entries and the run path (DT_RUNPATH, else DT_RPATH, unexpanded) of a 64-bit
// little-endian ELF file.
struct ElfDynamicInfo {
  std::vector<std::string> needed;
  std::string run_path;
};
StatusOr<ElfDynamicInfo> ReadElfDynamicInfo(const std::string& path);
// The contents of section `name` of a 64-bit little-endian ELF file (at most 4 KiB); NotFound
// when the file has no such section.
StatusOr<std::string> ReadElfSection(const std::string& path, const std::string& name);

// Looks up and opens every DT_NEEDED library of `plugin_path` that the C/C++ runtime does not
// provide (libc, libm, libstdc++, libgcc_s, libdl, libpthread, librt, the loader), by the order
// above. Never fails hard: what is missing is in the report, and opening the plugin then fails
// with the loader's own message.
// `backend` names the environment variable (KILN_<BACKEND>_LIBRARY_PATH, BackendName upper-cased).
PluginDependencyReport PreloadPluginDependencies(Backend backend, const std::string& plugin_path);

// The folders step 4 searches for `backend` (kCuda; empty for others), existing ones only.
std::vector<std::string> PythonWheelLibraryFolders(Backend backend);

}  // namespace kiln::runtime
