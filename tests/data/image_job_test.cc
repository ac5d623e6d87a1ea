// The library's image job (include/kiln/image_job.h) with the bundled Fashion-MNIST CNN: records
// for good and corrupt files, the first batch apart from the steady state, checks before any work,
// resume (file names that are not UTF-8 included), and one run per job.
#include "kiln/image_job.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "job_test_util.h"
#include "kiln/session.h"

namespace kiln {
namespace {

using ImageJobTest = JobTestDir;

std::unique_ptr<Session> DemoSession() {
  auto s = Session::Load(KILN_SOURCE_DIR "/demo/fashion_mnist_cnn.onnx");
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

int Lines(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST_F(ImageJobTest, RecordsEveryImageAndSplitsTheFirstBatch) {
  for (int i = 0; i < 7; ++i) WritePng("imgs/" + std::to_string(i) + ".png", i * 30);
  Write("imgs/broken.png", "not a png");
  auto session = DemoSession();
  ASSERT_NE(session, nullptr);
  ImageJobOptions o;
  o.images = P("imgs");
  o.recipe = "fashion-mnist";
  o.out = P("records.jsonl");
  o.batch = 3;
  o.workers = 2;
  o.top_k = 2;
  auto job = ImageJob::Create(*session, o);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ((*job)->plan().found, 8);
  EXPECT_EQ((*job)->plan().todo, 8);
  EXPECT_TRUE((*job)->plan().classifier);
  int calls = 0;
  auto sum = (*job)->Run([&](const ImageJobProgress& p) {
    ++calls;
    EXPECT_LE(p.done, p.total);
  });
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(calls, 3);  // batches of 3 items: 3 + 3 + 2
  EXPECT_EQ(sum->done, 8);
  EXPECT_EQ(sum->ok, 7);
  EXPECT_EQ(sum->failed, 1);
  EXPECT_EQ(sum->first_batch_images, 3);
  EXPECT_GT(sum->first_batch_s, 0);
  EXPECT_GE(sum->work_s, sum->first_batch_s);
  EXPECT_GT(sum->steady_images_per_s, 0);
  EXPECT_EQ(Lines(o.out), 8);
  // A job runs once.
  EXPECT_EQ((*job)->Run().status().code(), StatusCode::kInvalidArgument);

  // Resume: everything is recorded already.
  o.resume = true;
  auto again = ImageJob::Create(*session, o);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->plan().skipped, 8);
  EXPECT_EQ((*again)->plan().todo, 0);
  auto none = (*again)->Run();
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->done, 0);
  EXPECT_EQ(Lines(o.out), 8);
}

TEST_F(ImageJobTest, ChecksBeforeAnyWork) {
  WritePng("imgs/a.png", 10);
  Write("labels.txt", "a\nb\nc\n");  // the model has 10 classes
  auto session = DemoSession();
  ASSERT_NE(session, nullptr);
  ImageJobOptions o;
  o.images = P("imgs");
  o.recipe = "fashion-mnist";
  o.out = P("records.jsonl");
  o.labels = P("labels.txt");
  auto job = ImageJob::Create(*session, o);
  ASSERT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(job.status().message().find("10 classes"), std::string::npos)
      << job.status().ToString();
  EXPECT_FALSE(fs::exists(o.out));  // nothing written

  o.labels.clear();
  o.out = P("records.txt");
  EXPECT_EQ(ImageJob::Create(*session, o).status().code(), StatusCode::kInvalidArgument);
  o.out = P("records.csv");
  o.images = P("missing");
  EXPECT_EQ(ImageJob::Create(*session, o).status().code(), StatusCode::kNotFound);
  o.images = P("imgs");
  o.recipe = "no-such-recipe";
  EXPECT_FALSE(ImageJob::Create(*session, o).ok());
  EXPECT_FALSE(fs::exists(P("records.csv")));
}

// A file whose name is not UTF-8 (bytes 0xff 0xfe: a Linux name is any bytes but '/' and NUL).
// JSON Lines records keep its exact bytes ("path_hex" beside a "path" with U+FFFD), CSV writes
// them as they are, so --resume knows the image is done: run twice, each image is recorded once.
// The first run's record of the other image is then dropped, as a killed job's would be missing:
// the resumed run does that image alone.
TEST_F(ImageJobTest, ResumeRecognisesPathsThatAreNotUtf8) {
  const std::string odd = "imgs/b\xff\xfe.png";
  WritePng(odd, 40);
  WritePng("imgs/a.png", 10);
  ASSERT_TRUE(fs::exists(P(odd)));
  auto session = DemoSession();
  ASSERT_NE(session, nullptr);
  for (const std::string out : {"records.jsonl", "records.csv"}) {
    const bool csv = out.ends_with(".csv");
    ImageJobOptions o;
    o.images = P("imgs");
    o.recipe = "fashion-mnist";
    o.out = P(out);
    for (bool resume : {false, true}) {
      o.resume = resume;
      auto job = ImageJob::Create(*session, o);
      ASSERT_TRUE(job.ok()) << job.status().ToString();
      EXPECT_EQ((*job)->plan().todo, resume ? 0 : 2) << out;
      EXPECT_EQ((*job)->plan().skipped, resume ? 2 : 0) << out;
      auto sum = (*job)->Run();
      ASSERT_TRUE(sum.ok()) << sum.status().ToString();
      EXPECT_EQ(sum->done, resume ? 0 : 2) << out;
      EXPECT_EQ(Lines(o.out), csv ? 3 : 2) << out;  // a record per image (and CSV's header)
    }
    const std::string text = Slurp(o.out);
    if (csv) {
      EXPECT_NE(text.find("b\xff\xfe.png,ok,"), std::string::npos) << text;
    } else {
      EXPECT_NE(text.find("\"path_hex\":\""), std::string::npos) << text;
      EXPECT_NE(text.find("62fffe2e706e67\""), std::string::npos) << text;  // hex of b\xff\xfe.png
      EXPECT_EQ(text.find('\xff'), std::string::npos) << "JSON must be UTF-8: " << text;
    }
    // Drop a.png's record (the first line after CSV's header), as if the job had been killed
    // before writing it: the resumed run does a.png and only a.png.
    const size_t first = csv ? text.find('\n') + 1 : 0;
    const size_t cut = text.find('\n', first) + 1;
    ASSERT_NE(text.find("a.png", first), std::string::npos);
    ASSERT_LT(text.find("a.png", first), cut) << text;
    std::ofstream(o.out, std::ios::binary | std::ios::trunc)
        << text.substr(0, first) << text.substr(cut);
    o.resume = true;
    auto job = ImageJob::Create(*session, o);
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    EXPECT_EQ((*job)->plan().todo, 1) << out;
    ASSERT_TRUE((*job)->Run().ok());
    EXPECT_EQ(Lines(o.out), csv ? 3 : 2) << out;
  }
}

}  // namespace
}  // namespace kiln
