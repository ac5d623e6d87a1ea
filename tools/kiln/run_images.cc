// The image job of `kiln run` (see run_images.h and docs/image-jobs.md): the job itself is the
// library's ImageJob (include/kiln/image_job.h); this file loads the session, prints the plan, a
// progress bar (or lines) on stderr and the summary on stdout.
#include "run_images.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include "kiln/image_job.h"
#include "kiln/session.h"

namespace kiln::cli {
namespace {

std::string Duration(double s) {
  char buf[32];
  if (s < 90)
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s < 5400)
    std::snprintf(buf, sizeof buf, "%.0fm%02.0fs", std::floor(s / 60), std::fmod(s, 60));
  else
    std::snprintf(buf, sizeof buf, "%.0fh%02.0fm", std::floor(s / 3600), std::fmod(s / 60, 60));
  return buf;
}

}  // namespace

CLI::Option* AddImageJobOptions(CLI::App* cmd, ImageJobArgs* a) {
  CLI::Option* images = cmd->add_option(
      "--images", a->images,
      "Image job: a directory (recursive, .jpg/.jpeg/.png) or a list file (one path per line)");
  cmd->add_option("--recipe", a->recipe,
                  "Preprocessing: a preset (torchvision-imagenet, paddleocr, scale01, "
                  "fashion-mnist) or a recipe .json file")
      ->needs(images);
  cmd->add_option("--batch", a->batch, "Images per model run (image job)")
      ->check(CLI::Range(1, 1 << 20))
      ->needs(images);
  cmd->add_option("--workers", a->workers, "Decode threads (default: one per CPU this process may use: affinity mask, cgroup quota)")
      ->check(CLI::Range(0, 1024))
      ->needs(images);
  cmd->add_option("--threads", a->threads, "Model threads (default: physical cores)")
      ->check(CLI::Range(0, 1024))
      ->needs(images);
  cmd->add_option("--labels", a->labels, "Class names, one per line (image job)")->needs(images);
  cmd->add_option("--top-k", a->top_k, "Classes per record (image job)")
      ->check(CLI::Range(1, 1 << 20))
      ->needs(images);
  cmd->add_option("--out", a->out, "Records: FILE.jsonl or FILE.csv (image job)")->needs(images);
  images->needs(cmd->get_option("--out"));
  cmd->add_flag("--resume", a->resume, "Skip images already recorded in --out")->needs(images);
  cmd->add_option("--shard", a->shard, "I/N (items with index % N == I) or auto")->needs(images);
  cmd->add_option("--shards", a->shards, "N for --shard auto with JOB_COMPLETION_INDEX")
      ->check(CLI::Range(1, 1 << 20))
      ->needs(images);
  return images;
}

Status RunImageJob(const std::string& model, SessionOptions options, const ImageJobArgs& a) {
  const auto t_start = std::chrono::steady_clock::now();
  ImageJobOptions jo;
  jo.images = a.images;
  jo.recipe = a.recipe;
  jo.labels = a.labels;
  jo.out = a.out;
  jo.shard = a.shard;
  jo.shards = a.shards;
  jo.batch = a.batch;
  jo.workers = a.workers;
  jo.top_k = a.top_k;
  jo.resume = a.resume;
  options.num_threads = a.threads;
  KILN_ASSIGN_OR_RETURN(auto session, Session::Load(model, options));
  KILN_ASSIGN_OR_RETURN(auto job, ImageJob::Create(*session, jo));
  const ImageJobPlan& p = job->plan();
  std::fprintf(stderr,
               "kiln: %lld images (%lld found%s%s), %lld already recorded, %lld to do; batch %d, "
               "%d workers, recipe %s\n",
               static_cast<long long>(p.items), static_cast<long long>(p.found),
               p.shard.empty() ? "" : ", ", p.shard.c_str(), static_cast<long long>(p.skipped),
               static_cast<long long>(p.todo), p.batch, p.workers, p.recipe.c_str());
  // A bar redrawn in place on a terminal; plain lines every 2 s otherwise (logs, CI).
  const bool tty = ::isatty(::fileno(stderr)) != 0;
  bool bar_drawn = false;
  double last_print = 0;
  auto progress = [&](const ImageJobProgress& g) {
    if (g.elapsed_s - last_print < (tty ? 0.25 : 2.0) || g.done >= g.total) return;
    last_print = g.elapsed_s;
    const double rate = g.done / g.elapsed_s;
    const std::string eta = Duration((g.total - g.done) / rate);
    if (tty) {
      const int filled = static_cast<int>(30 * g.done / g.total);
      std::fprintf(
          stderr, "\r[%s%s] %3d%% %lld/%lld images, %lld failed, %.1f images/s, ETA %s\033[K",
          std::string(filled, '#').c_str(), std::string(30 - filled, '.').c_str(),
          static_cast<int>(100 * g.done / g.total), static_cast<long long>(g.done),
          static_cast<long long>(g.total), static_cast<long long>(g.failed), rate, eta.c_str());
      bar_drawn = true;
    } else {
      std::fprintf(stderr, "kiln: %lld/%lld images (%lld failed), %.1f images/s, ETA %s\n",
                   static_cast<long long>(g.done), static_cast<long long>(g.total),
                   static_cast<long long>(g.failed), rate, eta.c_str());
    }
  };
  auto result = job->Run(progress);
  if (bar_drawn) std::fprintf(stderr, "\r\033[K");
  if (!result.ok()) return result.status();
  const ImageJobSummary& s = *result;
  const double total_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  std::printf(
      "done: %lld images (%lld ok, %lld failed), %lld skipped as already recorded, in %.2f s: "
      "%.1f images/s\n",
      static_cast<long long>(s.done), static_cast<long long>(s.ok),
      static_cast<long long>(s.failed), static_cast<long long>(s.skipped), s.work_s,
      s.images_per_s);
  if (s.steady_images_per_s > 0)
    std::printf(
        "steady state: %.1f images/s after the first batch (%lld images in %.2f s, plan "
        "preparation included)\n",
        s.steady_images_per_s, static_cast<long long>(s.first_batch_images), s.first_batch_s);
  std::printf(
      "time: decoding %.2f s (summed over %d workers: read %.2f, decode %.2f, transform %.2f), "
      "computing %.2f s, waiting for data %.2f s, writing records %.2f s; total with model load "
      "%.2f s\n"
      "records: %s\n",
      s.read_s + s.decode_s + s.transform_s, s.workers, s.read_s, s.decode_s, s.transform_s,
      s.compute_s, s.wait_s, s.write_s, total_s, s.records.c_str());
  return OkStatus();
}

}  // namespace kiln::cli
