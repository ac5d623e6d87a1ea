// Backend plugins: a backend whose libraries are heavy (CUDA: cuDNN and cuBLAS cost ~215 MB of
// RSS and ~70 ms once loaded) is built as a shared module, libkiln_<backend>.so, and opened only
// when a session asks for that backend. Its kernels and device register themselves from the
// module's static initialisers; the symbols it uses from kiln are resolved against the program
// that loaded it (kiln's targets link with ENABLE_EXPORTS), so there is one registry.
#pragma once

#include <string>
#include <vector>

#include "kiln/options.h"
#include "kiln/status.h"
#include "runtime/plugin_deps.h"

namespace kiln::runtime {

// The folders searched for libkiln_<backend>.so, in order: each entry of $KILN_PLUGIN_PATH
// (colon-separated), the folder of the program (or library) holding kiln, its ../lib and ../lib/kiln, and
// the build tree's plugin folder (compiled in, so tests and an uninstalled build find it).
std::vector<std::string> PluginSearchPath();

// The plugin of `backend` is the file libkiln_<BackendName(backend)>.so ("libkiln_cuda.so"); the
// name is a file identity only: its registrations say which Backend they serve.

// The first existing libkiln_<backend>.so on the search path, or "" when there is none.
std::string FindBackendPlugin(Backend backend);

// Opens libkiln_<backend>.so once per process (later calls return the first outcome), after
// checking its ABI stamp (a plugin of another kiln is refused before any of its code runs:
// Unavailable naming both) and opening its dependencies from where plugin_deps.h looks for
// them. NotFound
// names every folder searched; a module that exists but cannot be opened (a missing cuDNN, a
// symbol kiln does not export) is Unavailable with the loader's message. A backend whose name
// is not a plain identifier (lower-case letters, digits, '_') is InvalidArgument, never looked
// up as a file.
Status LoadBackendPlugin(Backend backend);

// OK when the file carries this kiln's plugin ABI stamp (plugin_abi.h), read from the file
// without loading it; else Unavailable naming both stamps (or saying it has none).
Status CheckPluginAbi(const std::string& path);

// The path of the module loaded for `backend`, or "" when none was.
std::string LoadedBackendPlugin(Backend backend);

// Where the dependencies of the module loaded (or tried) for `backend` were found; empty when
// LoadBackendPlugin found no module for it.
PluginDependencyReport LoadedPluginDependencies(Backend backend);

}  // namespace kiln::runtime
