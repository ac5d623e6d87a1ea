// A plugin's dependencies found before it is opened (runtime/plugin_deps.h): the ELF reader on
// real and broken files, a dependency outside the loader's path reported missing, found through
// the plugin's $ORIGIN run path, and found through KILN_<BACKEND>_LIBRARY_PATH.
#include "runtime/plugin_deps.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/test_backend.h"

namespace kiln::runtime {
namespace {

namespace fs = std::filesystem;
const std::string kDir = KILN_DEPS_FIXTURE_DIR;  // extra/, bare/, runpath/
// The fixture plugins' backend (core/test_backend.h): its variable is KILN_FIXTURE_LIBRARY_PATH.
const Backend kFixture = TestBackend("fixture");

TEST(PluginDepsTest, ReadsNeededAndRunPathOfAnElfFile) {
  auto info = ReadElfDynamicInfo(kDir + "/runpath/libkiln_depplug_runpath.so");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_NE(std::find(info->needed.begin(), info->needed.end(), "libkiln_depdep.so"),
            info->needed.end());
  // CMake appends the build folder of libkiln_depdep.so after ours.
  EXPECT_EQ(info->run_path.rfind("$ORIGIN/../extra:", 0), 0u) << info->run_path;
  auto bare = ReadElfDynamicInfo(kDir + "/bare/libkiln_depplug_bare.so");
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  EXPECT_EQ(bare->run_path, "");
}

TEST(PluginDepsTest, RejectsFilesThatAreNotElfOrAreCutShort) {
  const fs::path tmp = fs::temp_directory_path() / ("kiln_deps_" + std::to_string(getpid()));
  fs::create_directories(tmp);
  { std::ofstream(tmp / "text.so") << "not an ELF file at all"; }
  auto text = ReadElfDynamicInfo((tmp / "text.so").string());
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("not a 64-bit little-endian ELF"), std::string::npos);
  // Every prefix of a real library: an error or a (possibly partial) answer, never a crash.
  std::ifstream in(kDir + "/runpath/libkiln_depplug_runpath.so", std::ios::binary);
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  ASSERT_GT(bytes.size(), 1000u);
  int errors = 0;
  for (size_t n : {size_t{0}, size_t{16}, size_t{64}, size_t{100}, size_t{500}, bytes.size() / 2}) {
    std::ofstream(tmp / "cut.so", std::ios::binary).write(bytes.data(), static_cast<long>(n));
    errors += ReadElfDynamicInfo((tmp / "cut.so").string()).ok() ? 0 : 1;
  }
  EXPECT_GE(errors, 4);
  EXPECT_EQ(ReadElfDynamicInfo((tmp / "missing.so").string()).status().code(),
            StatusCode::kNotFound);
  fs::remove_all(tmp);
}

// The three lookups run in this order: once libkiln_depdep.so is loaded, later lookups find it
// loaded.
TEST(PluginDepsTest, MissingThenRunPathThenEnvironment) {
  unsetenv("KILN_FIXTURE_LIBRARY_PATH");
  const PluginDependencyReport missing =
      PreloadPluginDependencies(kFixture, kDir + "/bare/libkiln_depplug_bare.so");
  EXPECT_EQ(missing.env_var, "KILN_FIXTURE_LIBRARY_PATH");
  ASSERT_EQ(missing.libs.size(), 1u);  // libc/libstdc++/libgcc_s/libm are not listed
  EXPECT_EQ(missing.libs[0].soname, "libkiln_depdep.so");
  EXPECT_TRUE(missing.libs[0].path.empty());
  EXPECT_FALSE(missing.libs[0].error.empty());
  EXPECT_FALSE(missing.ok());
  EXPECT_EQ(dlopen((kDir + "/bare/libkiln_depplug_bare.so").c_str(), RTLD_NOW), nullptr);

  const PluginDependencyReport via_runpath =
      PreloadPluginDependencies(kFixture, kDir + "/runpath/libkiln_depplug_runpath.so");
  ASSERT_EQ(via_runpath.libs.size(), 1u);
  EXPECT_TRUE(via_runpath.ok());
  EXPECT_EQ(via_runpath.libs[0].how, "plugin run path");
  EXPECT_EQ(fs::canonical(via_runpath.libs[0].path),
            fs::canonical(kDir + "/extra/libkiln_depdep.so"));
  EXPECT_NE(std::find(via_runpath.searched.begin(), via_runpath.searched.end(),
                      kDir + "/runpath/../extra"),
            via_runpath.searched.end());

  // Now loaded, the plugin without a run path opens too.
  ASSERT_EQ(setenv("KILN_FIXTURE_LIBRARY_PATH", (kDir + "/extra").c_str(), 1), 0);
  const PluginDependencyReport via_env =
      PreloadPluginDependencies(kFixture, kDir + "/bare/libkiln_depplug_bare.so");
  ASSERT_EQ(via_env.libs.size(), 1u);
  EXPECT_EQ(via_env.libs[0].how, "KILN_FIXTURE_LIBRARY_PATH");
  EXPECT_EQ(via_env.searched.front(), kDir + "/extra");
  void* h = dlopen((kDir + "/bare/libkiln_depplug_bare.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto fn = reinterpret_cast<int (*)()>(dlsym(h, "kiln_depplug_value"));
  ASSERT_NE(fn, nullptr);
  EXPECT_EQ(fn(), 43);
  unsetenv("KILN_FIXTURE_LIBRARY_PATH");
}

TEST(PluginDepsTest, WheelFoldersOnlyForCuda) {
  EXPECT_TRUE(PythonWheelLibraryFolders(kFixture).empty());
  const fs::path venv = fs::temp_directory_path() / ("kiln_venv_" + std::to_string(getpid()));
  fs::create_directories(venv / "lib/python3.12/site-packages/nvidia/cudnn/lib");
  fs::create_directories(venv / "lib/python3.12/site-packages/nvidia/cu13/lib");
  ASSERT_EQ(setenv("VIRTUAL_ENV", venv.c_str(), 1), 0);
  const auto dirs = PythonWheelLibraryFolders(Backend::kCuda);
  unsetenv("VIRTUAL_ENV");
  for (const char* sub : {"cudnn", "cu13"}) {
    const std::string want = (venv / "lib/python3.12/site-packages/nvidia" / sub / "lib").string();
    EXPECT_NE(std::find(dirs.begin(), dirs.end(), want), dirs.end()) << want;
  }
  fs::remove_all(venv);
}

}  // namespace
}  // namespace kiln::runtime
