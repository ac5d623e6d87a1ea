// The job stages of the data pipeline: source listing and sharding, the prefetcher (order,
// compaction of failed images, a fixed buffer pool) and the record writer (formats, resume).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "data/prefetch.h"
#include "data/recipe.h"
#include "data/records.h"
#include "data/source.h"
#include "job_test_util.h"

namespace kiln::data {
namespace {

namespace fs = std::filesystem;

using JobStagesTest = JobTestDir;

TEST_F(JobStagesTest, WalkIsSortedRecursiveAndFiltersExtensions) {
  for (const char* f : {"b.JPG", "a.png", "sub/c.jpeg", "sub/z/d.Png", "e.txt", "f.gif", "g"})
    Write(f, "x");
  fs::create_directories(P("dir.jpg"));  // a directory named like an image is not an item
  auto items = ListImages(dir_.string());
  ASSERT_TRUE(items.ok()) << items.status().ToString();
  std::vector<std::string> want;
  for (const char* f : {"a.png", "b.JPG", "sub/c.jpeg", "sub/z/d.Png"}) want.push_back(P(f));
  EXPECT_EQ(*items, want);
}

TEST_F(JobStagesTest, ListFileIsRelativeToItsFolder) {
  Write("l/list.txt", "# comment\nb.jpg\n\n/abs/c.png\r\nsub/a.jpg\n");
  auto items = ListImages(P("l/list.txt"));
  ASSERT_TRUE(items.ok()) << items.status().ToString();
  EXPECT_EQ(*items, (std::vector<std::string>{P("l/b.jpg"), "/abs/c.png", P("l/sub/a.jpg")}));
}

TEST_F(JobStagesTest, SourceErrors) {
  auto missing = ListImages(P("nope"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("does not exist"), std::string::npos);
  Write("only.txt", "");
  fs::create_directories(P("empty"));
  EXPECT_EQ(ListImages(P("empty")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ListImages(P("only.txt")).status().code(), StatusCode::kInvalidArgument);
}

TEST(ShardTest, ParsesAndCovers) {
  auto none = [](const char*) -> const char* { return nullptr; };
  auto s = ParseShard("1/3", 0, none);
  ASSERT_TRUE(s.ok());
  std::vector<std::string> items;
  for (int i = 0; i < 10; ++i) items.push_back(std::to_string(i));
  EXPECT_EQ(ApplyShard(items, *s), (std::vector<std::string>{"1", "4", "7"}));
  std::multiset<std::string> all;
  for (int i = 0; i < 3; ++i)
    for (auto& x : ApplyShard(items, *ParseShard(std::to_string(i) + "/3", 0, none))) all.insert(x);
  EXPECT_EQ(all, std::multiset<std::string>(items.begin(), items.end()));
  for (const char* bad : {"3/3", "-1/3", "1/0", "1", "a/b", "1/3x", "/3"})
    EXPECT_EQ(ParseShard(bad, 0, none).status().code(), StatusCode::kInvalidArgument) << bad;
  EXPECT_FALSE(ParseShard("0/2", 4, none).ok());  // --shards only with auto
  EXPECT_FALSE(ParseShard("auto", 0, none).ok());
}

TEST(ShardTest, AutoFromSchedulers) {
  std::map<std::string, std::string> env;
  auto get = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  env["JOB_COMPLETION_INDEX"] = "2";
  EXPECT_FALSE(ParseShard("auto", 0, get).ok());  // needs --shards
  auto k = ParseShard("auto", 4, get);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->index, 2);
  EXPECT_EQ(k->count, 4);
  EXPECT_FALSE(ParseShard("auto", 2, get).ok());  // 2 is not < 2
  env.clear();
  env["SLURM_ARRAY_TASK_ID"] = "5";
  env["SLURM_ARRAY_TASK_MIN"] = "3";
  env["SLURM_ARRAY_TASK_COUNT"] = "4";
  auto sl = ParseShard("auto", 0, get);
  ASSERT_TRUE(sl.ok()) << sl.status().ToString();
  EXPECT_EQ(sl->index, 2);
  EXPECT_EQ(sl->count, 4);
  env["SLURM_ARRAY_TASK_ID"] = "x";
  EXPECT_FALSE(ParseShard("auto", 0, get).ok());
}

// The staging pool comes from Options::allocate when given (the image job passes the session's
// page-locked allocator on CUDA): one call per buffer at Create, batches handed out inside those
// buffers, and an allocation failure is Create's error.
TEST_F(JobStagesTest, PrefetcherTakesItsBuffersFromTheAllocator) {
  std::vector<std::string> paths;
  for (int i = 0; i < 7; ++i) {
    WritePng("a" + std::to_string(i) + ".png", i * 20);
    paths.push_back(P("a" + std::to_string(i) + ".png"));
  }
  auto recipe = PresetRecipe("scale01", 4, 4);
  ASSERT_TRUE(recipe.ok());
  recipe->normalize.channels = 1;
  std::vector<std::pair<char*, size_t>> given;
  Prefetcher::Options opts{3, 2, 2, [&given](size_t bytes) -> StatusOr<std::shared_ptr<void>> {
                             char* p =
                                 static_cast<char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
                             given.push_back({p, bytes});
                             return std::shared_ptr<void>(p, std::free);
                           }};
  auto pf = Prefetcher::Create(*recipe, paths, opts);
  ASSERT_TRUE(pf.ok()) << pf.status().ToString();
  ASSERT_EQ(given.size(), 2u);
  EXPECT_EQ(given[0].second, 3u * 16 * sizeof(float));
  int batches = 0;
  while (Batch* b = (*pf)->Next()) {
    const char* d = reinterpret_cast<const char*>(b->data);
    EXPECT_TRUE(d == given[0].first || d == given[1].first);
    for (size_t j = 0; j < b->good.size(); ++j)
      EXPECT_FLOAT_EQ(b->data[j * 16], b->good[j] * 20 / 255.f);
    (*pf)->Release(b);
    ++batches;
  }
  EXPECT_EQ(batches, 3);

  opts.allocate = [](size_t) -> StatusOr<std::shared_ptr<void>> {
    return Status(StatusCode::kOutOfMemory, "no pinned memory left");
  };
  auto failed = Prefetcher::Create(*recipe, paths, opts);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().ToString().find("no pinned memory left"), std::string::npos);
  EXPECT_NE(failed.status().ToString().find("staging buffer of 192 bytes"), std::string::npos)
      << failed.status().ToString();
}

TEST_F(JobStagesTest, PrefetcherKeepsOrderCompactsFailuresAndReusesBuffers) {
  std::vector<std::string> paths;
  std::set<int64_t> bad = {0, 6, 7, 8, 9, 10, 22};  // batch 1 (5..9) keeps only image 5
  for (int i = 0; i < 23; ++i) {
    const std::string rel = "i" + std::to_string(100 + i) + ".png";
    if (bad.count(i))
      Write(rel, i == 7 ? "" : "not an image");
    else
      WritePng(rel, i * 10);
    paths.push_back(P(rel));
  }
  auto recipe = PresetRecipe("scale01", 4, 4);
  ASSERT_TRUE(recipe.ok());
  recipe->normalize.channels = 1;
  auto pf = Prefetcher::Create(*recipe, paths, {5, 3, 2, nullptr});
  ASSERT_TRUE(pf.ok()) << pf.status().ToString();
  Prefetcher& p = **pf;
  EXPECT_EQ(p.sample_elements(), 16);
  EXPECT_EQ(p.num_batches(), 5);
  std::set<const float*> buffers;
  std::vector<int64_t> seen;
  int64_t number = 0;
  while (Batch* b = p.Next()) {
    EXPECT_EQ(b->number, number++);
    buffers.insert(b->data);
    for (size_t j = 0; j < b->good.size(); ++j) {
      const int64_t item = b->good[j];
      EXPECT_FALSE(bad.count(item)) << item;
      for (int e = 0; e < 16; ++e)
        ASSERT_FLOAT_EQ(b->data[j * 16 + e], item * 10 / 255.f) << "item " << item;
      seen.push_back(item);
    }
    for (const auto& f : b->failed) {
      EXPECT_TRUE(bad.count(f.item)) << f.item;
      EXPECT_FALSE(f.status.ok());
      EXPECT_NE(f.status.ToString().find(paths[f.item]), std::string::npos) << f.status.ToString();
      seen.push_back(f.item);
    }
    if (b->number == 1) {
      EXPECT_EQ(b->good, std::vector<int64_t>{5});
    }
    p.Release(b);
  }
  std::sort(seen.begin(), seen.end());
  std::vector<int64_t> want(23);
  for (int i = 0; i < 23; ++i) want[i] = i;
  EXPECT_EQ(seen, want);
  EXPECT_LE(buffers.size(), 2u);  // the pool, never a buffer per batch
  const PrefetchStats st = p.stats();
  EXPECT_EQ(st.preprocess.images_ok, 16);
  EXPECT_EQ(st.preprocess.images_failed, 7);
}

TEST_F(JobStagesTest, PrefetcherSweepAndEarlyStop) {
  std::vector<std::string> paths;
  for (int i = 0; i < 11; ++i) {
    const std::string rel = "s" + std::to_string(i) + ".png";
    if (i % 4 == 3)
      Write(rel, "bad");
    else
      WritePng(rel, i);
    paths.push_back(P(rel));
  }
  auto recipe = PresetRecipe("fashion-mnist", 4, 4);
  ASSERT_TRUE(recipe.ok());
  for (int batch : {1, 2, 3, 11, 16})
    for (int workers : {1, 2, 5})
      for (int depth : {1, 2, 3}) {
        auto pf = Prefetcher::Create(*recipe, paths, {batch, workers, depth, nullptr});
        ASSERT_TRUE(pf.ok());
        int64_t next = 0;
        while (Batch* b = (*pf)->Next()) {
          std::vector<int64_t> items = b->good;
          for (const auto& f : b->failed) items.push_back(f.item);
          std::sort(items.begin(), items.end());
          for (int64_t item : items) EXPECT_EQ(item, next++);
          (*pf)->Release(b);
        }
        EXPECT_EQ(next, 11) << batch << " " << workers << " " << depth;
      }
  // A consumer that stops early (a model error) destroys the prefetcher with work left: no hang.
  for (int depth : {1, 3}) {
    auto pf = Prefetcher::Create(*recipe, paths, {2, 3, depth, nullptr});
    ASSERT_TRUE(pf.ok());
    ASSERT_NE((*pf)->Next(), nullptr);
  }
}

TEST_F(JobStagesTest, RecordsRoundTripAndResumeCutsPartialLine) {
  Record ok{"a,\"b\".jpg", "", {3, 1}, {0.75f, 0.25f}, {"cat", "dog"}, {}};
  Record err{"c.png", "InvalidArgument: bad, \"very\"", {}, {}, {}, {}};
  for (RecordFormat f : {RecordFormat::kJsonl, RecordFormat::kCsv}) {
    std::string path;
    for (const Record& r : {ok, err}) {
      ASSERT_TRUE(
          RecordPath(FormatRecord(r, f).substr(0, FormatRecord(r, f).size() - 1), f, &path));
      EXPECT_EQ(path, r.path);
    }
  }
  EXPECT_EQ(FormatRecord(ok, RecordFormat::kJsonl),
            "{\"path\":\"a,\\\"b\\\".jpg\",\"top_k\":[3,1],\"scores\":[0.75,0.25],"
            "\"labels\":[\"cat\",\"dog\"]}\n");
  EXPECT_EQ(FormatRecord(ok, RecordFormat::kCsv),
            "\"a,\"\"b\"\".jpg\",ok,3;1,0.75;0.25,cat;dog,\n");
  for (const char* name : {"r.jsonl", "r.csv"}) {
    {
      auto w = RecordWriter::Open(P(name), false);
      ASSERT_TRUE(w.ok()) << w.status().ToString();
      (*w)->Add(ok);
      (*w)->Add(err);
      ASSERT_TRUE((*w)->Flush().ok());
    }
    std::ofstream(P(name), std::ios::app) << "{\"path\":\"half";  // a killed job's last write
    {
      auto w = RecordWriter::Open(P(name), true);
      ASSERT_TRUE(w.ok()) << w.status().ToString();
      EXPECT_EQ((*w)->done(), (std::unordered_set<std::string>{ok.path, err.path}));
      (*w)->Add(Record{"d.jpg", "", {0}, {1.f}, {}, {}});
      ASSERT_TRUE((*w)->Flush().ok());
    }
    std::ifstream in(P(name));
    std::string line;
    int n = 0;
    std::string path;
    while (std::getline(in, line))
      if (RecordPath(line,
                     std::string(name).ends_with("csv") ? RecordFormat::kCsv : RecordFormat::kJsonl,
                     &path))
        ++n;
    EXPECT_EQ(n, 3) << name;
  }
  Write("garbage.jsonl", "not json\n");
  EXPECT_FALSE(RecordWriter::Open(P("garbage.jsonl"), true).ok());
  EXPECT_FALSE(RecordWriter::Open(P("no/dir/o.jsonl"), false).ok());
  EXPECT_FALSE(RecordWriter::Open(P("o.txt"), false).ok());
}

// A CSV path holding a line break is quoted over two lines; --resume reads it as one record. A
// quoted field no complete line closes is refused, naming its line (the file is not cut).
TEST_F(JobStagesTest, CsvResumeKeepsQuotedLineBreaks) {
  Record r{"a\nb.jpg", "", {1}, {0.5f}, {}, {}};
  {
    auto w = RecordWriter::Open(P("n.csv"), false);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    (*w)->Add(r);
    (*w)->Add(Record{"c.jpg", "", {0}, {1.f}, {}, {}});
    ASSERT_TRUE((*w)->Flush().ok());
  }
  auto w = RecordWriter::Open(P("n.csv"), true);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ((*w)->done(), (std::unordered_set<std::string>{r.path, "c.jpg"}));
  Write("open.csv", "path,status,top_k,scores,labels,error\n\"x.jpg,ok,1,0.5,,\nd.jpg,ok,,,,\n");
  auto bad = RecordWriter::Open(P("open.csv"), true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2 of"), std::string::npos) << bad.status().ToString();
}

// Paths that are not UTF-8 (a Linux file name is any bytes): a JSON Lines record stays UTF-8
// (U+FFFD in "path") and keeps the bytes as hex in "path_hex", CSV writes the bytes; RecordPath and
// --resume give the bytes back. A "path_hex" that is not hex of whole bytes is not a record.
TEST_F(JobStagesTest, RecordsKeepPathsThatAreNotUtf8) {
  const Record ok{"imgs/\xff\xc3(.jpg", "", {1}, {0.5f}, {}, {}};
  const Record err{"e/\x80.png", "InvalidArgument: cannot decode e/\x80.png", {}, {}, {}, {}};
  for (RecordFormat f : {RecordFormat::kJsonl, RecordFormat::kCsv}) {
    for (const Record& r : {ok, err}) {
      std::string line = FormatRecord(r, f), path;
      line.pop_back();
      ASSERT_TRUE(RecordPath(line, f, &path)) << line;
      EXPECT_EQ(path, r.path);
      if (f == RecordFormat::kJsonl) {
        EXPECT_EQ(line.find_first_of("\x80\xff"), std::string::npos) << "not UTF-8: " << line;
      } else {
        EXPECT_EQ(line.rfind(r.path + ",", 0), 0u) << line;
      }
    }
  }
  EXPECT_NE(
      FormatRecord(ok, RecordFormat::kJsonl).find("\"path_hex\":\"696d67732fffc3282e6a7067\""),
      std::string::npos);
  for (const char* name : {"u.jsonl", "u.csv"}) {
    {
      auto w = RecordWriter::Open(P(name), false);
      ASSERT_TRUE(w.ok()) << w.status().ToString();
      (*w)->Add(ok);
      (*w)->Add(err);
      ASSERT_TRUE((*w)->Flush().ok());
    }
    auto w = RecordWriter::Open(P(name), true);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    EXPECT_EQ((*w)->done(), (std::unordered_set<std::string>{ok.path, err.path})) << name;
  }
  std::string path;
  EXPECT_TRUE(RecordPath(R"({"path":"?","path_hex":"4A6b"})", RecordFormat::kJsonl, &path));
  EXPECT_EQ(path, "Jk");
  for (const char* bad : {R"({"path":"a","path_hex":"6"})", R"({"path":"a","path_hex":"zz"})",
                          R"({"path":"a","path_hex":61})", R"({"path_hex":"61"})"})
    EXPECT_FALSE(RecordPath(bad, RecordFormat::kJsonl, &path)) << bad;
}

TEST_F(JobStagesTest, LabelsFile) {
  auto l = ParseLabels("tench\r\ngold fish\n\nshark\r\r\n\n\r\n", "l.txt");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(*l, (std::vector<std::string>{"tench", "gold fish", "", "shark\r"}));
  EXPECT_FALSE(ParseLabels("\n\r\n", "l.txt").ok());
  Write("l.txt", "a\nb");
  auto f = ReadLabels(P("l.txt"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(*f, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ReadLabels(P("none.txt")).status().code(), StatusCode::kNotFound);
}

TEST(RecipePresetTest, FashionMnist) {
  auto r = PresetRecipe("fashion-mnist");
  ASSERT_TRUE(r.ok());
  auto pre = Preprocessor::Create(*r);
  ASSERT_TRUE(pre.ok());
  EXPECT_EQ((*pre)->OutputShape(), (Shape{1, 28, 28}));
}

}  // namespace
}  // namespace kiln::data
