// Loader robustness: external data confined to the model folder, malformed and hostile files
// rejected with errors (never a crash), structural errors naming the node.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "kiln/session.h"
#include "model_builder.h"
#include "onnx/onnx_loader.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::ModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            ("kiln_loader_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void WriteFile(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f << bytes;
}

// y = x + w where w (4 floats) lives in external data at `location`.
std::string ExternalModel(const std::string& location, int64_t offset = 0) {
  ModelBuilder m;
  m.Input("x", kF32, {4}).Output("y", kF32, {4});
  auto& w = m.FloatInit("w", {4}, {});
  w.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = w.add_external_data();
  kv->set_key("location");
  kv->set_value(location);
  kv = w.add_external_data();
  kv->set_key("offset");
  kv->set_value(std::to_string(offset));
  m.Node("Add", {"x", "w"}, {"y"});
  return m.Bytes();
}

std::string FourFloats() {
  float v[4] = {1.f, 2.f, 3.f, 4.f};
  return std::string(reinterpret_cast<const char*>(v), sizeof(v));
}

TEST(LoaderTest, ReadsExternalDataInsideModelFolder) {
  TempDir d;
  fs::create_directories(d.path() / "weights");
  WriteFile(d.path() / "weights" / "w.bin", "pad!" + FourFloats());
  WriteFile(d.path() / "m.onnx", ExternalModel("weights/w.bin", 4));
  auto s = Session::Load((d.path() / "m.onnx").string());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::vector<NamedTensor> out;
  ASSERT_TRUE((*s)->Run({{"x", Tensor::Empty(DataType::kFloat, {4})}}, &out).ok());
  EXPECT_EQ(out[0].tensor.data<float>()[3], 4.f);
}

TEST(LoaderTest, RejectsExternalDataEscapingTheFolder) {
  TempDir outside, d;
  WriteFile(outside.path() / "secret.bin", FourFloats());
  fs::create_symlink(outside.path() / "secret.bin", d.path() / "link.bin");
  struct Case {
    std::string location, must_mention;
  };
  for (const Case& c :
       {Case{(outside.path() / "secret.bin").string(), "must be relative"},
        Case{"../x/secret.bin", "must not contain '..'"},
        Case{"link.bin", "resolves outside the model folder"}, Case{"missing.bin", "not found"}}) {
    WriteFile(d.path() / "m.onnx", ExternalModel(c.location));
    auto s = Session::Load((d.path() / "m.onnx").string());
    ASSERT_FALSE(s.ok()) << c.location;
    const std::string msg = s.status().ToString();
    EXPECT_NE(msg.find(c.must_mention), std::string::npos) << msg;
    EXPECT_NE(msg.find("initializer 'w'"), std::string::npos) << msg;
  }
}

TEST(LoaderTest, RejectsShortExternalFile) {
  TempDir d;
  WriteFile(d.path() / "w.bin", "abc");
  WriteFile(d.path() / "m.onnx", ExternalModel("w.bin"));
  auto s = Session::Load((d.path() / "m.onnx").string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("too short"), std::string::npos) << s.status().message();
}

// A tiny file claiming a huge initializer with no data is refused before anything is allocated
// (the loader fuzzer's first find: 100 bytes asked for 8 GiB, zeroed). The process's peak RSS
// must not grow by anything like the 8 GiB the dims claim.
TEST(LoaderTest, RejectsHugeInitializerWithoutDataBeforeAllocating) {
  auto peak_mb = [] {
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
  };
  const long before = peak_mb();
  for (bool raw : {false, true}) {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {1}).Output("y", onnx::TensorProto::FLOAT, {1});
    auto& w = m.FloatInit("w", {int64_t{1} << 31}, {});
    if (raw) w.set_raw_data("abcd");
    m.Node("Add", {"x", "w"}, {"y"});
    auto s = Session::LoadFromBytes(m.Bytes());
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidModel) << s.status().ToString();
    EXPECT_NE(s.status().message().find(raw ? "raw_data holds 4 bytes" : "holds 0 values"),
              std::string::npos)
        << s.status().ToString();
  }
  EXPECT_LT(peak_mb() - before, 512) << "peak RSS grew: the 8 GiB tensor was allocated";
}

TEST(LoaderTest, RejectsGarbageAndMissingFiles) {
  EXPECT_EQ(Session::Load("/nonexistent/model.onnx").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Session::LoadFromBytes("this is not a protobuf").status().code(),
            StatusCode::kInvalidModel);
  EXPECT_EQ(Session::LoadFromBytes("").status().code(), StatusCode::kInvalidModel);
}

TEST(LoaderTest, NamesNodeReadingUndefinedValue) {
  ModelBuilder m;
  m.Input("x", kF32, {2}).Output("y", kF32, {2});
  m.Node("Add", {"x", "ghost"}, {"y"}, "adder");
  auto s = Session::LoadFromBytes(m.Bytes());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("'adder'"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("'ghost'"), std::string::npos) << s.status().message();
}

// A node ONNX's checker does not check (opset 18, newer than Debian's libonnx; or no opset
// import at all) must still have its required inputs: a ReduceL2 with none read past its inputs
// (found by the session fuzzer, tests/fuzz/corpus/regress_reduce_no_input.onnx).
TEST(LoaderTest, RejectsNodesWithoutTheirRequiredInputs) {
  for (const bool no_import : {false, true}) {
    ModelBuilder m(18);
    m.Input("x", kF32, {2}).Output("y", kF32, {});
    m.Node("ReduceL2", {}, {"y"}, "reduce");
    onnx::ModelProto proto;
    ASSERT_TRUE(proto.ParseFromString(m.Bytes()));
    if (no_import) proto.clear_opset_import();
    auto s = Session::LoadFromBytes(proto.SerializeAsString());
    ASSERT_FALSE(s.ok()) << (no_import ? "no opset import" : "opset 18");
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidModel) << s.status().ToString();
    EXPECT_NE(s.status().message().find("'reduce' (ReduceL2) needs 1 input(s); input 0 is missing"),
              std::string::npos)
        << s.status().ToString();
  }
}

TEST(LoaderTest, RejectsInconsistentInitializer) {
  ModelBuilder m;
  m.Input("x", kF32, {2}).Output("y", kF32, {2});
  m.FloatInit("w", {3}, {1.f, 2.f});  // 2 values for 3 elements
  m.Node("Add", {"x", "w"}, {"y"});
  auto s = Session::LoadFromBytes(m.Bytes());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("initializer 'w'"), std::string::npos)
      << s.status().message();
}

// Seeded mutation fuzzing of a real model: every mutated file must load or fail with a Status;
// loads that succeed must also run or fail cleanly.
TEST(LoaderTest, SurvivesMutatedModels) {
  ModelBuilder m;
  m.Input("x", kF32, {1, 1, 4, 4}).Output("y", kF32, {1, 2, 3, 3});
  m.FloatInit("w", {2, 1, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  m.FloatInit("b", {2}, {0.5f, -0.5f});
  m.Node("Conv", {"x", "w", "b"}, {"c"});
  m.Node("Relu", {"c"}, {"y"});
  const std::string base = m.Bytes();
  std::mt19937 rng(42);
  int loaded = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string b = base;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % b.size();
      switch (rng() % 3) {
        case 0:
          b[pos] = static_cast<char>(rng());
          break;
        case 1:
          b.erase(pos, 1 + rng() % 8);
          break;
        default:
          b.insert(pos, 1, static_cast<char>(rng()));
          break;
      }
      if (b.empty()) b = "x";
    }
    auto s = Session::LoadFromBytes(b);
    if (!s.ok()) {
      EXPECT_FALSE(s.status().message().empty());
      ++rejected;
      continue;
    }
    ++loaded;
    std::vector<NamedTensor> in;
    for (const auto& spec : (*s)->inputs()) {
      Shape shape;
      for (int64_t d : spec.dims) shape.push_back(d >= 0 && d <= 64 ? d : 1);
      if (spec.dtype == DataType::kFloat)
        in.push_back({spec.name, Tensor::Empty(spec.dtype, shape)});
    }
    std::vector<NamedTensor> out;
    (void)(*s)->Run(in, &out);
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(loaded, 0);
}

}  // namespace
}  // namespace kiln
