// The process-wide weight store (runtime/model_store.h): sessions of one model file share its
// weights, options that change the graph and changed files do not share, and closing the last
// session gives the memory back to the system (resident set measured from /proc/self/statm).
// Its own binary: resident-set figures would be blurred by other tests' allocations.
#include "runtime/model_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kiln/session.h"
#include "onnx/model_builder.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

double ResidentMiB() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

// x[1,k] -> MatMul(W0) -> Relu -> MatMul(W1) -> y[1,k]; two k*k float weights (8*k*k bytes),
// filled from `seed`. With `external`, the weights live in "<name>.data" beside the model.
std::string WriteModel(const fs::path& path, int64_t k, unsigned seed, bool external = false) {
  onnxio::ModelBuilder b;
  b.Input("x", onnx::TensorProto::FLOAT, {1, k}).Output("y", onnx::TensorProto::FLOAT, {1, k});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  std::string data;
  for (int w = 0; w < 2; ++w) {
    std::vector<float> v(static_cast<size_t>(k * k));
    for (float& x : v) x = u(rng);
    auto& t = b.FloatInit("W" + std::to_string(w), {k, k}, {});
    const std::string bytes(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    if (external) {
      t.set_data_location(onnx::TensorProto::EXTERNAL);
      auto add = [&](const std::string& key, const std::string& value) {
        auto* kv = t.add_external_data();
        kv->set_key(key);
        kv->set_value(value);
      };
      add("location", path.filename().string() + ".data");
      add("offset", std::to_string(data.size()));
      add("length", std::to_string(bytes.size()));
      data += bytes;
    } else {
      t.set_raw_data(bytes);
    }
  }
  b.Node("MatMul", {"x", "W0"}, {"h"});
  b.Node("Relu", {"h"}, {"r"});
  b.Node("MatMul", {"r", "W1"}, {"y"});
  if (external) std::ofstream(path.string() + ".data", std::ios::binary) << data;
  std::ofstream(path, std::ios::binary) << b.Bytes();
  return path.string();
}

class ModelStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln_model_store_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::unique_ptr<Session> Load(const std::string& path, SessionOptions o = {}) {
    o.num_threads = o.num_threads ? o.num_threads : 1;
    auto s = Session::Load(path, o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  // y for x = 1..k (scaled), so two models with other weights give other outputs.
  static std::vector<float> Run(const Session& s, int64_t k) {
    Tensor x = Tensor::Empty(DataType::kFloat, {1, k});
    for (int64_t i = 0; i < k; ++i) x.data<float>()[i] = 0.01f * static_cast<float>(i % 97);
    std::vector<NamedTensor> out;
    Status st = s.Run({{"x", x}}, &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) return {};
    const float* y = out[0].tensor.data<float>();
    return {y, y + k};
  }

  fs::path dir_;
};

TEST_F(ModelStoreTest, SessionsOfOneFileShareWeightsAndPackedCopies) {
  const std::string path = WriteModel(dir_ / "m.onnx", 256, 1);
  auto a = Load(path);
  auto b = Load(path);
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(a->stats().weights_shared);
  EXPECT_TRUE(b->stats().weights_shared);
  EXPECT_EQ(a->stats().constant_bytes, 2u * 256 * 256 * 4);
  EXPECT_EQ(Run(*a, 256), Run(*b, 256));
  // b's kernels found a's packed copies instead of making their own.
  EXPECT_EQ(a->stats().packed_weight_bytes, b->stats().packed_weight_bytes);
  EXPECT_GT(b->stats().packed_weight_reuses, 0u) << "packed weights were not shared";
  EXPECT_EQ(runtime::ModelStore::Global().live_models(), 1u);
  a.reset();
  b.reset();
  EXPECT_EQ(runtime::ModelStore::Global().live_models(), 0u);
}

TEST_F(ModelStoreTest, GraphChangingOptionsAndOptOutDoNotShare) {
  const std::string path = WriteModel(dir_ / "m.onnx", 64, 2);
  auto a = Load(path);
  SessionOptions threads;
  threads.num_threads = 2;  // planning only: shares
  EXPECT_TRUE(Load(path, threads)->stats().weights_shared);
  SessionOptions reference;
  reference.reference_only = true;  // planning only: shares
  EXPECT_TRUE(Load(path, reference)->stats().weights_shared);
  SessionOptions unoptimized;
  unoptimized.optimize = false;
  EXPECT_FALSE(Load(path, unoptimized)->stats().weights_shared);
  SessionOptions disabled;
  disabled.disabled_passes = {"fold_constants"};
  EXPECT_FALSE(Load(path, disabled)->stats().weights_shared);
  SessionOptions opt_out;
  opt_out.share_weights = false;
  auto c = Load(path, opt_out);
  EXPECT_FALSE(c->stats().weights_shared);
  EXPECT_FALSE(Load(path, opt_out)->stats().weights_shared);  // nor from an opted-out one
  EXPECT_EQ(Run(*a, 64), Run(*c, 64));
}

TEST_F(ModelStoreTest, ARewrittenFileIsLoadedAgain) {
  const fs::path path = dir_ / "m.onnx";
  WriteModel(path, 64, 3);
  auto a = Load(path.string());
  const std::vector<float> before = Run(*a, 64);
  WriteModel(path, 64, 4);  // other weights, same name
  auto b = Load(path.string());
  EXPECT_FALSE(b->stats().weights_shared);
  EXPECT_NE(Run(*b, 64), before);
  EXPECT_EQ(Run(*a, 64), before);  // the open session keeps what it loaded
  // The same bytes under another name share.
  fs::copy_file(path, dir_ / "copy.onnx");
  EXPECT_TRUE(Load((dir_ / "copy.onnx").string())->stats().weights_shared);
}

TEST_F(ModelStoreTest, ExternalDataSharesOnlyWhileItsFilesAreTheSame) {
  const fs::path path = dir_ / "ext.onnx";
  WriteModel(path, 64, 5, /*external=*/true);
  auto a = Load(path.string());
  const std::vector<float> first = Run(*a, 64);
  EXPECT_TRUE(Load(path.string())->stats().weights_shared);
  // The same .onnx bytes in another folder read that folder's data file: not shared.
  fs::create_directories(dir_ / "other");
  WriteModel(dir_ / "other" / "ext.onnx", 64, 6, /*external=*/true);
  auto other = Load((dir_ / "other" / "ext.onnx").string());
  EXPECT_FALSE(other->stats().weights_shared);
  EXPECT_NE(Run(*other, 64), first);
  // The data file rewritten in place (same .onnx bytes): loaded again.
  WriteModel(path, 64, 7, /*external=*/true);
  auto b = Load(path.string());
  EXPECT_FALSE(b->stats().weights_shared);
  EXPECT_NE(Run(*b, 64), first);
}

TEST_F(ModelStoreTest, LoadFromBytesShares) {
  const std::string path = WriteModel(dir_ / "m.onnx", 64, 8);
  std::ifstream f(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto a = Load(path);
  auto b = Session::LoadFromBytes(bytes, {});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE((*b)->stats().weights_shared);
}

TEST_F(ModelStoreTest, SessionsRunConcurrentlyOnSharedWeights) {
  const std::string path = WriteModel(dir_ / "m.onnx", 128, 9);
  auto ref = Load(path, [] {
    SessionOptions o;
    o.share_weights = false;
    return o;
  }());
  const std::vector<float> want = Run(*ref, 128);
  std::vector<std::unique_ptr<Session>> sessions;
  for (int i = 0; i < 4; ++i) sessions.push_back(Load(path));
  std::vector<std::thread> threads;
  std::vector<int> wrong(sessions.size(), 0);
  for (size_t i = 0; i < sessions.size(); ++i)
    threads.emplace_back([&, i] {
      for (int r = 0; r < 20; ++r) wrong[i] += Run(*sessions[i], 128) != want;
    });
  for (auto& t : threads) t.join();
  for (int w : wrong) EXPECT_EQ(w, 0);
}

// Resident memory: 8 sessions of a 64 MiB model cost about one copy, and closing them all gives
// it back. Figures go to the log.
TEST_F(ModelStoreTest, EightSessionsCostOneCopyAndClosingGivesItBack) {
  const int64_t k = 2896;  // 2 * 2896^2 * 4 bytes = 64 MiB of weights
  const std::string path = WriteModel(dir_ / "big.onnx", k, 10);
  { Run(*Load(path), k); }  // libraries' one-time state (oneDNN, thread pools)
  const double start = ResidentMiB();
  double one = 0, eight = 0;
  {
    std::vector<std::unique_ptr<Session>> s;
    s.push_back(Load(path));
    Run(*s[0], k);
    one = ResidentMiB() - start;
    for (int i = 1; i < 8; ++i) {
      s.push_back(Load(path));
      Run(*s.back(), k);
    }
    eight = ResidentMiB() - start;
  }
  const double closed = ResidentMiB() - start;
  std::printf("resident MiB over start: 1 session %.1f, 8 sessions %.1f, all closed %.1f\n", one,
              eight, closed);
  EXPECT_GT(one, 60.0) << "the model's weights should be resident";
  EXPECT_LE(eight, 1.3 * one);
  EXPECT_LE(closed, 0.1 * one) << "closing the sessions did not give the memory back";
  // Without sharing, the same eight cost eight copies (what the store saves).
  SessionOptions own;
  own.share_weights = false;
  {
    std::vector<std::unique_ptr<Session>> s;
    for (int i = 0; i < 8; ++i) {
      s.push_back(Load(path, own));
      Run(*s.back(), k);
    }
    const double unshared = ResidentMiB() - start;
    std::printf("8 sessions without sharing: %.1f MiB\n", unshared);
    EXPECT_GT(unshared, 6 * one);
  }
  EXPECT_LE(ResidentMiB() - start, 0.1 * one);
}

// Opening, running and closing a session 1,000 times ends where it began (within 5 % of the
// resident set after the first cycle).
TEST_F(ModelStoreTest, AThousandOpenRunCloseCyclesReturnTheMemory) {
  const int64_t k = 512;  // 2 MiB of weights
  const std::string path = WriteModel(dir_ / "m.onnx", k, 11);
  { Run(*Load(path), k); }
  const double start = ResidentMiB();
  double peak = start;
  for (int i = 0; i < 1000; ++i) {
    auto s = Load(path);
    ASSERT_TRUE(s);
    Run(*s, k);
    s.reset();
    peak = std::max(peak, ResidentMiB());
  }
  const double end = ResidentMiB();
  std::printf("resident MiB: start %.1f, end %.1f, highest after a close %.1f\n", start, end, peak);
  EXPECT_LE(end, 1.05 * start);
}

}  // namespace
}  // namespace kiln
