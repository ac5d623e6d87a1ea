// The image job of `kiln run` (see run_images.h and README "The kiln command"): checks everything
// it can before any work, then streams batches from the prefetcher through the model into the
// record writer, printing progress on stderr and a summary on stdout.
#include "run_images.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>
#include <unordered_map>

#include "common.h"
#include "core/npy.h"
#include "data/prefetch.h"
#include "data/recipe.h"
#include "data/records.h"
#include "data/source.h"
#include "kiln/session.h"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

StatusOr<std::vector<std::string>> ReadLabels(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read labels file '" + path + "'");
  std::vector<std::string> labels;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    labels.push_back(line);
  }
  while (!labels.empty() && labels.back().empty()) labels.pop_back();
  if (labels.empty()) return InvalidArgument("labels file '" + path + "' is empty");
  return labels;
}

// The recipe: a JSON file, or a preset sized to the model's fixed height and width.
StatusOr<data::Recipe> ResolveRecipe(const std::string& spec, const TensorSpec& input) {
  const int64_t h = input.dims.size() == 4 ? input.dims[2] : -1;
  const int64_t w = input.dims.size() == 4 ? input.dims[3] : -1;
  if (spec.empty()) {
    if (input.dims.size() == 4 && input.dims[1] == 3 && h > 0 && w > 0)
      return data::PresetRecipe("torchvision-imagenet", static_cast<int>(w), static_cast<int>(h));
    return InvalidArgument("input '" + input.ToString() +
                           "' is not a fixed-size RGB image; give --recipe PRESET or FILE.json");
  }
  if (spec.size() > 5 && spec.compare(spec.size() - 5, 5, ".json") == 0)
    return data::LoadRecipeFile(spec);
  if (h > 0 && w > 0) {
    auto r = data::PresetRecipe(spec, static_cast<int>(w), static_cast<int>(h));
    if (r.ok()) return r;
  }
  return data::PresetRecipe(spec);
}

// Top-k of one row of scores; softmax first unless the row already is a distribution.
void TopK(const float* row, int64_t classes, int k, data::Record* r) {
  bool probs = true;
  double sum = 0;
  for (int64_t c = 0; c < classes; ++c) {
    if (!(row[c] >= 0.f && row[c] <= 1.f)) probs = false;
    sum += row[c];
  }
  std::vector<float> p(row, row + classes);
  if (!probs || std::fabs(sum - 1.0) > 1e-3) {
    const float mx = *std::max_element(p.begin(), p.end());
    double total = 0;
    for (float& v : p) total += (v = std::exp(v - mx));
    for (float& v : p) v = static_cast<float>(v / total);
  }
  std::vector<int64_t> idx(classes);
  std::iota(idx.begin(), idx.end(), 0);
  k = static_cast<int>(std::min<int64_t>(k, classes));
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int64_t a, int64_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  r->top_k.assign(idx.begin(), idx.begin() + k);
  for (int i = 0; i < k; ++i) r->scores.push_back(p[idx[i]]);
}

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
  cmd->add_option("--workers", a->workers, "Decode threads (default: one per hardware thread)")
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

// Writes image i's slice of every output (dim 0 is the batch) to
// <dir>/<position, 8 digits>_<sanitized output name>.npy and names the files in the record.
Status SaveRawOutputs(const std::vector<NamedTensor>& outputs, int64_t i, int64_t run_n,
                      const std::string& dir, int64_t position, data::Record* r) {
  char prefix[32];
  std::snprintf(prefix, sizeof(prefix), "%08lld_", static_cast<long long>(position));
  for (const auto& o : outputs) {
    const Tensor& y = o.tensor;
    if (y.rank() < 1 || y.shape()[0] != run_n)
      return Unsupported("output '" + o.name + "' is " + DataTypeName(y.dtype()) +
                         ShapeToString(y.shape()) + "; raw outputs need the batch as dim 0 (" +
                         std::to_string(run_n) + ")");
    Shape sample(y.shape().begin() + 1, y.shape().end());
    const size_t bytes = y.bytes() / static_cast<size_t>(run_n);
    Tensor view =
        Tensor::View(y.dtype(), sample, static_cast<char*>(const_cast<void*>(y.raw())) + i * bytes);
    const std::string path =
        (std::filesystem::path(dir) / (prefix + SanitizeFileName(o.name) + ".npy")).string();
    KILN_RETURN_IF_ERROR(WriteNpyFile(view, path));
    r->outputs.push_back(path);
  }
  return OkStatus();
}

Status RunImageJob(const std::string& model, SessionOptions options, const ImageJobArgs& a) {
  const auto t_start = Clock::now();
  // Everything that can be wrong is checked before the first image is decoded.
  auto getenv = [](const char* n) -> const char* { return std::getenv(n); };
  KILN_ASSIGN_OR_RETURN(data::ShardSpec shard, data::ParseShard(a.shard, a.shards, getenv));
  KILN_ASSIGN_OR_RETURN(const data::RecordFormat format, data::RecordFormatFor(a.out));
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> all, data::ListImages(a.images));
  std::vector<std::string> items = data::ApplyShard(all, shard);
  std::vector<std::string> labels;
  if (!a.labels.empty()) {
    KILN_ASSIGN_OR_RETURN(labels, ReadLabels(a.labels));
  }

  options.num_threads = a.threads;
  KILN_ASSIGN_OR_RETURN(auto session, Session::Load(model, options));
  if (session->inputs().size() != 1)
    return Unsupported("the image job needs a model with one input; this one has " +
                       std::to_string(session->inputs().size()));
  const TensorSpec& in = session->inputs()[0];
  if (in.dtype != DataType::kFloat || in.dims.size() != 4)
    return Unsupported("the image job needs a float32 input of rank 4; input is " + in.ToString());
  if (session->outputs().empty()) return Unsupported("the model has no outputs");
  const TensorSpec& out = session->outputs()[0];
  // A classifier (first output [N, classes]) gets top-k records; any other model gets its raw
  // outputs saved per image as .npy files in <out>.outputs/, named in its JSON Lines record.
  const bool classifier = out.dims.size() == 2;
  const std::string raw_dir = a.out + ".outputs";
  std::unordered_map<std::string, int64_t> position;  // path -> index in the full sorted list
  if (!classifier) {
    if (format != data::RecordFormat::kJsonl)
      return InvalidArgument("the model's first output is " + out.ToString() +
                             ", not [N, classes]: its raw outputs are saved as .npy files named "
                             "in JSON Lines records; use --out FILE.jsonl");
    if (!a.labels.empty())
      return InvalidArgument("--labels needs a classifier; the model's first output is " +
                             out.ToString());
    std::error_code ec;
    std::filesystem::create_directories(raw_dir, ec);
    if (ec || !std::filesystem::is_directory(raw_dir))
      return InvalidArgument("cannot create the raw output folder '" + raw_dir + "'");
    for (size_t i = 0; i < all.size(); ++i) position[all[i]] = static_cast<int64_t>(i);
  }
  if (classifier && !labels.empty() && out.dims[1] > 0 &&
      static_cast<int64_t>(labels.size()) != out.dims[1])
    return InvalidArgument("labels file '" + a.labels + "' has " + std::to_string(labels.size()) +
                           " lines but the model has " + std::to_string(out.dims[1]) + " classes");
  KILN_ASSIGN_OR_RETURN(data::Recipe recipe, ResolveRecipe(a.recipe, in));
  KILN_ASSIGN_OR_RETURN(auto probe, data::Preprocessor::Create(recipe));
  const Shape sample = probe->OutputShape();
  for (size_t d = 0; d < 3; ++d)
    if (in.dims[d + 1] > 0 && in.dims[d + 1] != sample[d])
      return InvalidArgument("recipe '" + recipe.name + "' makes images of " +
                             ShapeToString(sample) + " but input is " + in.ToString());
  // A fixed batch dim: every run uses it (partial batches are padded with zeros).
  const int64_t fixed_batch = in.dims[0] > 0 ? in.dims[0] : 0;
  const int batch = fixed_batch ? static_cast<int>(fixed_batch) : a.batch;

  KILN_ASSIGN_OR_RETURN(auto writer, data::RecordWriter::Open(a.out, a.resume));
  std::vector<std::string> todo;
  for (auto& p : items)
    if (!writer->done().count(p)) todo.push_back(std::move(p));
  const int64_t skipped = static_cast<int64_t>(items.size() - todo.size());
  const int workers = a.workers > 0
                          ? a.workers
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const std::string shard_note = shard.count > 1
                                     ? ", shard " + std::to_string(shard.index) + "/" +
                                           std::to_string(shard.count) + " from " + shard.origin
                                     : "";
  std::fprintf(stderr,
               "kiln: %zu images (%zu found%s), %lld already recorded, %zu to do; batch %d, "
               "%d workers, recipe %s\n",
               items.size(), all.size(), shard_note.c_str(), static_cast<long long>(skipped),
               todo.size(), batch, workers, recipe.name.c_str());

  const auto t_work = Clock::now();
  data::Prefetcher::Options popts;
  popts.batch = batch;
  popts.workers = workers;
  popts.depth = 3;
  // Staging buffers from the session: page-locked on the CUDA backend, so a batch goes to the
  // device straight from where the workers decoded it.
  popts.allocate = [&session](size_t bytes) { return session->AllocateHostBuffer(bytes); };
  KILN_ASSIGN_OR_RETURN(auto prefetch, data::Prefetcher::Create(recipe, todo, popts));
  const int64_t total = static_cast<int64_t>(todo.size());
  int64_t done = 0, failed = 0;
  double compute_s = 0, write_s = 0;
  auto last_print = Clock::now();
  // A bar redrawn in place on a terminal; plain lines every 2 s otherwise (logs, CI).
  const bool tty = ::isatty(::fileno(stderr)) != 0;
  bool bar_drawn = false;
  std::vector<NamedTensor> outputs;
  while (data::Batch* b = prefetch->Next()) {
    const int64_t good = static_cast<int64_t>(b->good.size());
    std::vector<data::Record> records(good);
    if (good > 0) {
      const int64_t run_n = fixed_batch ? fixed_batch : good;
      if (run_n > good)
        std::fill(b->data + good * prefetch->sample_elements(),
                  b->data + run_n * prefetch->sample_elements(), 0.f);
      Shape shape = {run_n, sample[0], sample[1], sample[2]};
      std::vector<NamedTensor> inputs = {{in.name, Tensor::View(DataType::kFloat, shape, b->data)}};
      const auto t0 = Clock::now();
      Status s = session->Run(inputs, &outputs);
      compute_s += Since(t0);
      if (!s.ok()) return s.AddContext("while running batch " + std::to_string(b->number));
      if (!classifier) {
        for (int64_t i = 0; i < good; ++i) {
          records[i].path = todo[b->good[i]];
          KILN_RETURN_IF_ERROR(
              SaveRawOutputs(outputs, i, run_n, raw_dir, position[records[i].path], &records[i]));
        }
      }
    }
    if (good > 0 && classifier) {
      const int64_t run_n = fixed_batch ? fixed_batch : good;
      const Tensor& y = outputs[0].tensor;
      if (y.dtype() != DataType::kFloat || y.rank() != 2 || y.shape()[0] != run_n)
        return Unsupported("output '" + outputs[0].name + "' is " + DataTypeName(y.dtype()) +
                           ShapeToString(y.shape()) +
                           "; the image job expects float32[N, classes]");
      const int64_t classes = y.shape()[1];
      if (!labels.empty() && static_cast<int64_t>(labels.size()) != classes)
        return InvalidArgument("labels file '" + a.labels + "' has " +
                               std::to_string(labels.size()) + " lines but the model gives " +
                               std::to_string(classes) + " classes");
      for (int64_t i = 0; i < good; ++i) {
        records[i].path = todo[b->good[i]];
        TopK(y.data<float>() + i * classes, classes, a.top_k, &records[i]);
        for (int64_t c : records[i].top_k)
          if (!labels.empty()) records[i].labels.push_back(labels[c]);
      }
    }
    // Records in item order: the good ones and the failures merged.
    size_t gi = 0, fi = 0;
    while (gi < records.size() || fi < b->failed.size()) {
      if (fi < b->failed.size() && (gi == records.size() || b->failed[fi].item < b->good[gi])) {
        data::Record r;
        r.path = todo[b->failed[fi].item];
        r.error = b->failed[fi].status.ToString();  // one line: context joined with "; "
        for (size_t nl; (nl = r.error.find("\n  ")) != std::string::npos;)
          r.error.replace(nl, 3, "; ");
        writer->Add(r);
        ++fi;
      } else {
        writer->Add(records[gi++]);
      }
    }
    const auto t_write = Clock::now();
    KILN_RETURN_IF_ERROR(writer->Flush());
    write_s += Since(t_write);
    done += good + static_cast<int64_t>(b->failed.size());
    failed += static_cast<int64_t>(b->failed.size());
    prefetch->Release(b);
    if (Since(last_print) >= (tty ? 0.25 : 2.0) && done < total) {
      last_print = Clock::now();
      const double rate = done / Since(t_work);
      const std::string eta = Duration((total - done) / rate);
      if (tty) {
        const int filled = static_cast<int>(30 * done / total);
        std::fprintf(
            stderr, "\r[%s%s] %3d%% %lld/%lld images, %lld failed, %.1f images/s, ETA %s\033[K",
            std::string(filled, '#').c_str(), std::string(30 - filled, '.').c_str(),
            static_cast<int>(100 * done / total), static_cast<long long>(done),
            static_cast<long long>(total), static_cast<long long>(failed), rate, eta.c_str());
        bar_drawn = true;
      } else {
        std::fprintf(stderr, "kiln: %lld/%lld images (%lld failed), %.1f images/s, ETA %s\n",
                     static_cast<long long>(done), static_cast<long long>(total),
                     static_cast<long long>(failed), rate, eta.c_str());
      }
    }
  }
  if (bar_drawn) std::fprintf(stderr, "\r\033[K");
  const double work_s = Since(t_work);
  const data::PrefetchStats st = prefetch->stats();
  const double prep_s = st.preprocess.read_s + st.preprocess.decode_s + st.preprocess.transform_s;
  std::printf(
      "done: %lld images (%lld ok, %lld failed), %lld skipped as already recorded, in %.2f s: "
      "%.1f images/s\n"
      "time: decoding %.2f s (summed over %d workers: read %.2f, decode %.2f, transform %.2f), "
      "computing %.2f s, waiting for data %.2f s, writing records %.2f s; total with model load "
      "%.2f s\n"
      "records: %s\n",
      static_cast<long long>(done), static_cast<long long>(done - failed),
      static_cast<long long>(failed), static_cast<long long>(skipped), work_s,
      work_s > 0 ? done / work_s : 0.0, prep_s, workers, st.preprocess.read_s,
      st.preprocess.decode_s, st.preprocess.transform_s, compute_s, st.wait_s, write_s,
      Since(t_start), a.out.c_str());
  return OkStatus();
}

}  // namespace kiln::cli
