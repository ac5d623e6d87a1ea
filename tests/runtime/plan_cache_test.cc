// The plan cache (src/runtime/plan_cache.h): entries round-trip, a different model or shape is a
// different entry, a file whose key text differs is never used, corrupt files are ignored with a
// status, and a session with --tune reuses the choices a previous session measured. Every byte of
// a cache file is also flipped in turn: the session must still run and match the reference.
#include "runtime/plan_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "kiln/session.h"
#include "model_builder.h"

namespace kiln {
namespace {

using runtime::PlanCacheLookup;
using runtime::PlanCacheStore;
using testing::ModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;

class PlanCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kiln_plan_cache_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::vector<std::filesystem::path> Files() const {
    std::vector<std::filesystem::path> f;
    if (std::filesystem::exists(dir_))
      for (const auto& e : std::filesystem::directory_iterator(dir_)) f.push_back(e.path());
    return f;
  }
  std::filesystem::path dir_;
};

TEST_F(PlanCacheTest, EntriesRoundTripAndKeysAreCheckedInFull) {
  const runtime::PlanChoices choices = {{"conv1", "matmul"}, {"conv2", ""}, {"relu", ""}};
  EXPECT_EQ(PlanCacheLookup(dir_, "key A").status, "miss");
  ASSERT_TRUE(PlanCacheStore(dir_, "key A", choices).ok());
  auto hit = PlanCacheLookup(dir_, "key A");
  EXPECT_TRUE(hit.hit);
  EXPECT_EQ(hit.choices, choices);
  EXPECT_EQ(PlanCacheLookup(dir_, "key B").status, "miss");  // another file
  // A file found under a key's name whose key text differs (a hash collision, or a hand-copied
  // file) is never used.
  ASSERT_EQ(Files().size(), 1u);
  std::filesystem::copy_file(Files()[0], dir_ / "copy");
  std::filesystem::remove(Files()[0]);
  ASSERT_TRUE(PlanCacheStore(dir_, "key B", {}).ok());
  std::filesystem::path b_file;
  for (const auto& f : Files())
    if (f.filename() != "copy") b_file = f;
  std::filesystem::rename(dir_ / "copy", b_file);  // key A's content under key B's name
  auto stale = PlanCacheLookup(dir_, "key B");
  EXPECT_FALSE(stale.hit);
  EXPECT_EQ(stale.status, "stale (key differs)");
  EXPECT_TRUE(stale.choices.empty());
}

TEST_F(PlanCacheTest, CorruptFilesAreIgnoredWithAReason) {
  ASSERT_TRUE(PlanCacheStore(dir_, "k", {{"n", "matmul"}}).ok());
  const auto file = Files().at(0);
  for (const std::string& content : {std::string("garbage"), std::string("kiln plan cache 1\nk"),
                                     std::string("kiln plan cache 1\nk\n--\nno tab here\n"),
                                     std::string("kiln plan cache 1\nk\n--\n\tmatmul\n")}) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << content;
    auto r = PlanCacheLookup(dir_, "k");
    EXPECT_FALSE(r.hit) << content;
    EXPECT_TRUE(r.choices.empty());
    EXPECT_EQ(r.status.rfind("corrupt (", 0), 0u) << r.status;
  }
}

// 1x1 convolutions (the kernels --tune times) with a residual and activations.
std::string TunableModel() {
  ModelBuilder b;
  b.Input("x", kF32, {1, 16, 6, 6}).Output("y", kF32, {1, 16, 6, 6});
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-0.5f, 0.5f);
  std::vector<float> w1(32 * 16), w2(16 * 32);
  for (auto& v : w1) v = d(rng);
  for (auto& v : w2) v = d(rng);
  b.FloatInit("w1", {32, 16, 1, 1}, w1);
  b.FloatInit("w2", {16, 32, 1, 1}, w2);
  b.Node("Conv", {"x", "w1"}, {"c1"});
  b.Node("Relu", {"c1"}, {"r1"});
  b.Node("Conv", {"r1", "w2"}, {"c2"});
  b.Node("Add", {"c2", "x"}, {"y"});
  return b.Bytes();
}

Tensor Input() {
  Tensor t = Tensor::Empty(DataType::kFloat, {1, 16, 6, 6});
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i % 11) - 5.f;
  return t;
}

std::vector<NamedTensor> Reference() {
  SessionOptions ref;
  ref.reference_only = true;
  auto s = Session::LoadFromBytes(TunableModel(), ref);
  std::vector<NamedTensor> out;
  EXPECT_TRUE(s.ok() && (*s)->Run({{"x", Input()}}, &out).ok());
  return out;
}

void ExpectNear(const std::vector<NamedTensor>& got, const std::vector<NamedTensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (int64_t i = 0; i < want[0].tensor.numel(); ++i)
    ASSERT_NEAR(got[0].tensor.data<float>()[i], want[0].tensor.data<float>()[i],
                1e-4 + 1e-4 * std::fabs(want[0].tensor.data<float>()[i]));
}

TEST_F(PlanCacheTest, SessionsReuseTheMeasuredChoices) {
  SessionOptions opts;
  opts.tune = true;
  opts.plan_cache_dir = dir_.string();
  const auto want = Reference();
  auto first = Session::LoadFromBytes(TunableModel(), opts);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ((*first)->plan_cache_status(), "off");  // nothing planned yet
  std::vector<NamedTensor> got;
  ASSERT_TRUE((*first)->Run({{"x", Input()}}, &got).ok());
  ExpectNear(got, want);
  EXPECT_EQ((*first)->plan_cache_status().rfind("miss, stored ", 0), 0u)
      << (*first)->plan_cache_status();
  auto second = Session::LoadFromBytes(TunableModel(), opts);
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE((*second)->Run({{"x", Input()}}, &got).ok());
  ExpectNear(got, want);
  EXPECT_EQ((*second)->plan_cache_status().rfind("hit (", 0), 0u) << (*second)->plan_cache_status();
  EXPECT_EQ(Files().size(), 1u);
  // Other options plan differently: their own entry.
  opts.precision = Precision::kFp32;
  opts.num_threads = 1;
  auto third = Session::LoadFromBytes(TunableModel(), opts);
  ASSERT_TRUE(third.ok() && (*third)->Run({{"x", Input()}}, &got).ok());
  EXPECT_EQ((*third)->plan_cache_status().rfind("miss", 0), 0u);
  EXPECT_EQ(Files().size(), 2u);
  // Without --tune nothing is measured, so the cache is not used.
  opts.tune = false;
  auto plain = Session::LoadFromBytes(TunableModel(), opts);
  ASSERT_TRUE(plain.ok() && (*plain)->Run({{"x", Input()}}, &got).ok());
  EXPECT_EQ((*plain)->plan_cache_status(), "off");
}

TEST_F(PlanCacheTest, EveryFlippedByteStillRunsCorrectly) {
  SessionOptions opts;
  opts.tune = true;
  opts.plan_cache_dir = dir_.string();
  const auto want = Reference();
  {
    auto s = Session::LoadFromBytes(TunableModel(), opts);
    std::vector<NamedTensor> got;
    ASSERT_TRUE(s.ok() && (*s)->Run({{"x", Input()}}, &got).ok());
  }
  const auto file = Files().at(0);
  std::string original;
  {
    std::ifstream f(file, std::ios::binary);
    original.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  ASSERT_GT(original.size(), 100u);
  for (size_t i = 0; i < original.size(); ++i) {
    std::string bad = original;
    bad[i] = static_cast<char>(bad[i] ^ 0x5A);
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bad;
    auto s = Session::LoadFromBytes(TunableModel(), opts);
    ASSERT_TRUE(s.ok());
    std::vector<NamedTensor> got;
    Status st = (*s)->Run({{"x", Input()}}, &got);
    ASSERT_TRUE(st.ok()) << "byte " << i << ": " << st.ToString();
    ExpectNear(got, want);
  }
}

}  // namespace
}  // namespace kiln
