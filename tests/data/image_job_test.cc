// The library's image job (include/kiln/image_job.h) with the bundled Fashion-MNIST CNN: records
// for good and corrupt files, the first batch apart from the steady state, checks before any work,
// resume, and one run per job.
#include "kiln/image_job.h"

#include <gtest/gtest.h>

#include <fstream>
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

}  // namespace
}  // namespace kiln
