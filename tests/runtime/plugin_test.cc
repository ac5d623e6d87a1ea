// Backend plugins (runtime/plugin.h): a module found on KILN_PLUGIN_PATH registers its device
// and kernels into the program's registries when a session asks for its backend; a missing or
// broken module is a clear error naming what was searched or what the loader said. In a CUDA
// build, the real libkiln_cuda.so loads (its kiln symbols all resolve) and registers its kernels,
// and a CPU session never maps cuDNN or cuBLAS. The test modules serve test backends
// (core/test_backend.h): Backend values of their own whose names give the files looked for
// (TestBackend("testplug") -> libkiln_testplug.so), as BackendName(kCuda) gives libkiln_cuda.so.
#include "runtime/plugin.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/test_backend.h"
#include "onnx/model_builder.h"
#include "onnx/onnx_loader.h"
#include "runtime/device.h"
#include "runtime/half_values.h"
#include "runtime/kernel.h"
#include "runtime/plugin_abi.h"

namespace kiln::runtime {
namespace {

std::string Maps() {
  std::ifstream f("/proc/self/maps");
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Runs first in this binary (gtest keeps file order): nothing has opened a plugin yet.
TEST(PluginTest, CpuOnlyProgramMapsNoCudaLibraries) {
  ASSERT_TRUE(OpenDevice(Backend::kCpu, 0).ok());
  const std::string maps = Maps();
  EXPECT_EQ(maps.find("libcudnn"), std::string::npos);
  EXPECT_EQ(maps.find("libcublas"), std::string::npos);
  EXPECT_EQ(maps.find("libkiln_cuda"), std::string::npos);
}

TEST(PluginTest, LoadsFromPluginPathAndRegisters) {
  ASSERT_EQ(setenv("KILN_PLUGIN_PATH", "/nonexistent:" KILN_TEST_PLUGIN_DIR, 1), 0);
  const Backend testplug = TestBackend("testplug");
  EXPECT_EQ(FindBackendPlugin(testplug),
            std::filesystem::path(KILN_TEST_PLUGIN_DIR "/libkiln_testplug.so").string());
  EXPECT_TRUE(KernelRegistry::Global().All(testplug).empty());
  // Opening the device loads the module; its factory's own error comes back.
  auto dev = OpenDevice(testplug, 3);
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(dev.status().message().find("testplug device 3 opened from the plugin"),
            std::string::npos)
      << dev.status().ToString();
  ASSERT_EQ(KernelRegistry::Global().All(testplug).size(), 1u);
  EXPECT_EQ(KernelRegistry::Global().All(testplug)[0]->name, "testplug.relu.kernel");
  EXPECT_NE(LoadedBackendPlugin(testplug).find("libkiln_testplug.so"), std::string::npos);
  // Loaded once: a second load is the same outcome and registers nothing twice.
  EXPECT_TRUE(LoadBackendPlugin(testplug).ok());
  EXPECT_EQ(KernelRegistry::Global().All(testplug).size(), 1u);
  // The module registered for its backend only.
  for (const KernelDef* d : KernelRegistry::Global().All(Backend::kCpu))
    EXPECT_NE(d->name, "testplug.relu.kernel");
  unsetenv("KILN_PLUGIN_PATH");
}

TEST(PluginTest, MissingPluginNamesTheSearchPath) {
  ASSERT_EQ(setenv("KILN_PLUGIN_PATH", "/nonexistent/a:/nonexistent/b", 1), 0);
  const Backend missing = TestBackend("nosuchbackend");
  Status s = LoadBackendPlugin(missing);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("libkiln_nosuchbackend.so not found; searched: /nonexistent/a, "
                             "/nonexistent/b"),
            std::string::npos)
      << s.ToString();
  auto dev = OpenDevice(missing, 0);
  EXPECT_EQ(dev.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(dev.status().message().find("backend 'nosuchbackend' is not available: backend "
                                        "plugin libkiln_nosuchbackend.so not found"),
            std::string::npos)
      << dev.status().ToString();
  // Names that are not plain identifiers are never looked up as files.
  const Backend odd_name = TestBackend("../../etc/x");
  EXPECT_EQ(FindBackendPlugin(odd_name), "");
  EXPECT_EQ(LoadBackendPlugin(odd_name).code(), StatusCode::kInvalidArgument);
  auto odd = OpenDevice(odd_name, 0);
  EXPECT_EQ(odd.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(odd.status().message().find("cannot name a plugin file"), std::string::npos)
      << odd.status().ToString();
  EXPECT_TRUE(LoadedBackendPlugin(odd_name).empty());
  unsetenv("KILN_PLUGIN_PATH");
}

TEST(PluginTest, BrokenPluginReportsTheLoaderError) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln_plugin_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "libkiln_broken.so") << "not an ELF file";
  ASSERT_EQ(setenv("KILN_PLUGIN_PATH", dir.c_str(), 1), 0);
  auto dev = OpenDevice(TestBackend("broken"), 0);
  EXPECT_EQ(dev.status().code(), StatusCode::kUnavailable);
  // Not an ELF file: refused at the ABI check, which reads the file without loading it.
  EXPECT_NE(dev.status().message().find("refusing backend plugin"), std::string::npos)
      << dev.status().ToString();
  EXPECT_NE(dev.status().message().find("no kiln ABI stamp"), std::string::npos);
  EXPECT_NE(dev.status().message().find("libkiln_broken.so"), std::string::npos)
      << dev.status().ToString();
  unsetenv("KILN_PLUGIN_PATH");
  std::filesystem::remove_all(dir);
}

// A plugin built for another kiln is refused, naming both ABIs, before any of its code runs:
// its device registrar never registers.
TEST(PluginTest, PluginOfAnotherAbiIsRefused) {
  ASSERT_EQ(setenv("KILN_PLUGIN_PATH", KILN_TEST_PLUGIN_DIR, 1), 0);
  auto dev = OpenDevice(TestBackend("wrongabi"), 0);
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.status().code(), StatusCode::kUnavailable) << dev.status().ToString();
  EXPECT_NE(dev.status().message().find("built for 'kiln-plugin-abi=999 kiln=0.0.1'"),
            std::string::npos)
      << dev.status().ToString();
  EXPECT_NE(dev.status().message().find("this kiln is '" + PluginAbiText() + "'"),
            std::string::npos)
      << dev.status().ToString();
  EXPECT_EQ(dev.status().message().find("code ran"), std::string::npos);
  EXPECT_EQ(Maps().find("libkiln_wrongabi"), std::string::npos);
  EXPECT_TRUE(CheckPluginAbi(KILN_TEST_PLUGIN_DIR "/libkiln_testplug.so").ok());
  unsetenv("KILN_PLUGIN_PATH");
}

#ifdef KILN_CUDA_PLUGIN_BUILT
// The real CUDA plugin: every kiln symbol it needs resolves (RTLD_NOW), its kernels register,
// and without a GPU opening the device is Unavailable, not a crash.
TEST(PluginTest, CudaPluginLoadsAndRegistersItsKernels) {
  ASSERT_TRUE(LoadBackendPlugin(Backend::kCuda).ok())
      << LoadBackendPlugin(Backend::kCuda).ToString();
  EXPECT_GT(KernelRegistry::Global().All(Backend::kCuda).size(), 40u);
  auto dev = OpenDevice(Backend::kCuda, 0);
  if (!dev.ok()) {
    EXPECT_EQ(dev.status().code(), StatusCode::kUnavailable) << dev.status().ToString();
  }
  EXPECT_NE(Maps().find("libcudnn"), std::string::npos);
}

// The real CUDA kernels' half_inputs, through the rewrite --precision fp16 makes: every node of a
// small CNN keeps float16 activations but ConvTranspose (float32 only), whose input and output
// are cast; Gemm's B becomes a float16 constant while the convolution's weights, its bias and
// Gemm's C stay float32 (not data inputs).
TEST(PluginTest, CudaKernelsDeclareTheirFloat16Inputs) {
  ASSERT_TRUE(LoadBackendPlugin(Backend::kCuda).ok());
  constexpr int kF32 = onnx::TensorProto::FLOAT;
  onnxio::ModelBuilder b(13);
  b.Input("x", kF32, {1, 4, 8, 8}).Output("y", kF32, {1, 3});
  b.FloatInit("w", {4, 4, 3, 3}, std::vector<float>(144, 0.1f));
  b.FloatInit("b", {4}, {0.f, 1.f, 2.f, 3.f});
  b.FloatInit("wt", {4, 4, 2, 2}, std::vector<float>(64, 0.2f));
  b.FloatInit("fc", {3, 4}, std::vector<float>(12, 0.3f));
  b.FloatInit("fb", {3}, {1.f, 2.f, 3.f});
  onnxio::ModelBuilder::IntsAttr(b.Node("Conv", {"x", "w", "b"}, {"c"}), "pads", {1, 1, 1, 1});
  b.Node("Add", {"c", "x"}, {"s"});
  b.Node("Relu", {"s"}, {"r"});
  auto& pool = b.Node("MaxPool", {"r"}, {"p"});
  onnxio::ModelBuilder::IntsAttr(pool, "kernel_shape", {2, 2});
  onnxio::ModelBuilder::IntsAttr(pool, "strides", {2, 2});
  onnxio::ModelBuilder::IntsAttr(b.Node("ConvTranspose", {"p", "wt"}, {"u"}), "strides", {2, 2});
  b.Node("Mul", {"u", "r"}, {"m"});
  b.Node("GlobalAveragePool", {"m"}, {"g"});
  b.Node("Flatten", {"g"}, {"f"});
  onnxio::ModelBuilder::IntAttr(b.Node("Gemm", {"f", "fc", "fb"}, {"z"}), "transB", 1);
  b.Node("Softmax", {"z"}, {"y"});
  auto g = onnxio::LoadModelFromBytes(b.Bytes(), "");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::string what;
  ASSERT_TRUE(StoreHalfBetweenKernels(**g, Backend::kCuda, &what).ok());
  EXPECT_EQ(what,
            "float16 between kernels: 9 of 10 nodes, 9 values float16, 2 casts to float16, 2 back "
            "to float32, 1 constants converted");
  for (const ir::Node& n : (*g)->nodes) {
    const DataType in = (*g)->values[n.inputs[0]].dtype;
    if (n.op_type == "ConvTranspose") {
      EXPECT_NE(in, DataType::kFloat16);
    }
    if (n.op_type == "Gemm") {
      EXPECT_EQ((*g)->values[n.inputs[1]].dtype, DataType::kFloat16);  // B, converted
      EXPECT_EQ((*g)->values[n.inputs[2]].dtype, DataType::kFloat);    // C
    }
    if (n.op_type == "Conv") {
      EXPECT_EQ(in, DataType::kFloat16);
      EXPECT_EQ((*g)->values[n.inputs[1]].dtype, DataType::kFloat);  // W
    }
  }
}
#endif

}  // namespace
}  // namespace kiln::runtime
