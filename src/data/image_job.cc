// ImageJob (include/kiln/image_job.h): the image job of `kiln run --images`, as a library API.
// Everything that can be wrong is checked in Create(); Run() streams batches from the prefetcher
// through the model into the record writer.
#include "kiln/image_job.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <thread>
#include <unordered_map>

#include "core/cpu_info.h"
#include "core/npy.h"
#include "data/prefetch.h"
#include "data/recipe.h"
#include "data/records.h"
#include "data/source.h"
#include "kiln/tensor_io.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
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
        (std::filesystem::path(dir) / (prefix + TensorFileName(o.name) + ".npy")).string();
    KILN_RETURN_IF_ERROR(WriteNpyFile(view, path));
    r->outputs.push_back(path);
  }
  return OkStatus();
}

}  // namespace

struct ImageJob::Impl {
  const Session* session = nullptr;
  ImageJobOptions options;
  ImageJobPlan plan;
  std::vector<std::string> labels;
  std::vector<std::string> todo;
  std::unordered_map<std::string, int64_t> position;  // path -> index in the full sorted list
  data::Recipe recipe;
  Shape sample;
  int64_t fixed_batch = 0;
  std::unique_ptr<data::RecordWriter> writer;
  bool ran = false;

  Status RunBatch(data::Batch* b, const data::Prefetcher& prefetch,
                  std::vector<NamedTensor>* outputs, double* compute_s);
};

ImageJob::ImageJob(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ImageJob::~ImageJob() = default;
const ImageJobPlan& ImageJob::plan() const { return impl_->plan; }

StatusOr<std::unique_ptr<ImageJob>> ImageJob::Create(const Session& session,
                                                     const ImageJobOptions& a) {
  auto impl = std::make_unique<Impl>();
  impl->session = &session;
  impl->options = a;
  ImageJobPlan& plan = impl->plan;
  auto getenv = [](const char* n) -> const char* { return std::getenv(n); };
  KILN_ASSIGN_OR_RETURN(data::ShardSpec shard, data::ParseShard(a.shard, a.shards, getenv));
  KILN_ASSIGN_OR_RETURN(const data::RecordFormat format, data::RecordFormatFor(a.out));
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> all, data::ListImages(a.images));
  std::vector<std::string> items = data::ApplyShard(all, shard);
  if (!a.labels.empty()) {
    KILN_ASSIGN_OR_RETURN(impl->labels, data::ReadLabels(a.labels));
  }
  if (session.inputs().size() != 1)
    return Unsupported("the image job needs a model with one input; this one has " +
                       std::to_string(session.inputs().size()));
  const TensorSpec& in = session.inputs()[0];
  if (in.dtype != DataType::kFloat || in.dims.size() != 4)
    return Unsupported("the image job needs a float32 input of rank 4; input is " + in.ToString());
  if (session.outputs().empty()) return Unsupported("the model has no outputs");
  const TensorSpec& out = session.outputs()[0];
  // A classifier (first output [N, classes]) gets top-k records; any other model gets its raw
  // outputs saved per image as .npy files in <out>.outputs/, named in its JSON Lines record.
  plan.classifier = out.dims.size() == 2;
  if (!plan.classifier) {
    plan.raw_output_dir = a.out + ".outputs";
    if (format != data::RecordFormat::kJsonl)
      return InvalidArgument("the model's first output is " + out.ToString() +
                             ", not [N, classes]: its raw outputs are saved as .npy files named "
                             "in JSON Lines records; use --out FILE.jsonl");
    if (!a.labels.empty())
      return InvalidArgument("--labels needs a classifier; the model's first output is " +
                             out.ToString());
    std::error_code ec;
    std::filesystem::create_directories(plan.raw_output_dir, ec);
    if (ec || !std::filesystem::is_directory(plan.raw_output_dir))
      return InvalidArgument("cannot create the raw output folder '" + plan.raw_output_dir + "'");
    for (size_t i = 0; i < all.size(); ++i) impl->position[all[i]] = static_cast<int64_t>(i);
  }
  if (plan.classifier && !impl->labels.empty() && out.dims[1] > 0 &&
      static_cast<int64_t>(impl->labels.size()) != out.dims[1])
    return InvalidArgument("labels file '" + a.labels + "' has " +
                           std::to_string(impl->labels.size()) + " lines but the model has " +
                           std::to_string(out.dims[1]) + " classes");
  KILN_ASSIGN_OR_RETURN(impl->recipe, data::RecipeForInput(a.recipe, in.dims));
  KILN_ASSIGN_OR_RETURN(auto probe, data::Preprocessor::Create(impl->recipe));
  impl->sample = probe->OutputShape();
  for (size_t d = 0; d < 3; ++d)
    if (in.dims[d + 1] > 0 && in.dims[d + 1] != impl->sample[d])
      return InvalidArgument("recipe '" + impl->recipe.name + "' makes images of " +
                             ShapeToString(impl->sample) + " but input is " + in.ToString());
  // A fixed batch dim: every run uses it (partial batches are padded with zeros).
  impl->fixed_batch = in.dims[0] > 0 ? in.dims[0] : 0;
  plan.batch = impl->fixed_batch ? static_cast<int>(impl->fixed_batch) : a.batch;
  KILN_ASSIGN_OR_RETURN(impl->writer, data::RecordWriter::Open(a.out, a.resume));
  for (auto& p : items)
    if (!impl->writer->done().count(p)) impl->todo.push_back(std::move(p));
  plan.found = static_cast<int64_t>(all.size());
  plan.items = static_cast<int64_t>(items.size());
  plan.todo = static_cast<int64_t>(impl->todo.size());
  plan.skipped = plan.items - plan.todo;
  // One decode worker per CPU this process may use (affinity mask and cgroup quota).
  plan.workers = a.workers > 0 ? a.workers : GetCpuLimits().usable_cpus;
  plan.recipe = impl->recipe.name;
  if (shard.count > 1)
    plan.shard = "shard " + std::to_string(shard.index) + "/" + std::to_string(shard.count) +
                 " from " + shard.origin;
  return std::unique_ptr<ImageJob>(new ImageJob(std::move(impl)));
}

// Runs one batch and adds its records (the good ones and the failures, in item order).
Status ImageJob::Impl::RunBatch(data::Batch* b, const data::Prefetcher& prefetch,
                                std::vector<NamedTensor>* outputs, double* compute_s) {
  const int64_t good = static_cast<int64_t>(b->good.size());
  std::vector<data::Record> records(good);
  const int64_t run_n = fixed_batch ? fixed_batch : good;
  if (good > 0) {
    if (run_n > good)
      std::fill(b->data + good * prefetch.sample_elements(),
                b->data + run_n * prefetch.sample_elements(), 0.f);
    Shape shape = {run_n, sample[0], sample[1], sample[2]};
    std::vector<NamedTensor> inputs = {
        {session->inputs()[0].name, Tensor::View(DataType::kFloat, shape, b->data)}};
    const auto t0 = Clock::now();
    Status s = session->Run(inputs, outputs);
    *compute_s += Since(t0);
    if (!s.ok()) return s.AddContext("while running batch " + std::to_string(b->number));
    if (!plan.classifier) {
      for (int64_t i = 0; i < good; ++i) {
        records[i].path = todo[b->good[i]];
        KILN_RETURN_IF_ERROR(SaveRawOutputs(*outputs, i, run_n, plan.raw_output_dir,
                                            position[records[i].path], &records[i]));
      }
    } else {
      const Tensor& y = (*outputs)[0].tensor;
      if (y.dtype() != DataType::kFloat || y.rank() != 2 || y.shape()[0] != run_n)
        return Unsupported("output '" + (*outputs)[0].name + "' is " + DataTypeName(y.dtype()) +
                           ShapeToString(y.shape()) +
                           "; the image job expects float32[N, classes]");
      const int64_t classes = y.shape()[1];
      if (!labels.empty() && static_cast<int64_t>(labels.size()) != classes)
        return InvalidArgument("labels file '" + options.labels + "' has " +
                               std::to_string(labels.size()) + " lines but the model gives " +
                               std::to_string(classes) + " classes");
      for (int64_t i = 0; i < good; ++i) {
        records[i].path = todo[b->good[i]];
        TopKClasses(y.data<float>() + i * classes, classes, options.top_k, &records[i].top_k,
                    &records[i].scores);
        for (int64_t c : records[i].top_k)
          if (!labels.empty()) records[i].labels.push_back(labels[c]);
      }
    }
  }
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
  return OkStatus();
}

StatusOr<ImageJobSummary> ImageJob::Run(
    const std::function<void(const ImageJobProgress&)>& progress) {
  Impl& m = *impl_;
  if (m.ran) return InvalidArgument("an ImageJob runs once; this one has run");
  m.ran = true;
  const auto t_work = Clock::now();
  data::Prefetcher::Options popts;
  popts.batch = m.plan.batch;
  popts.workers = m.plan.workers;
  popts.depth = 3;
  // Staging buffers from the session: page-locked on the CUDA backend, so a batch goes to the
  // device straight from where the workers decoded it.
  const Session* session = m.session;
  popts.allocate = [session](size_t bytes) { return session->AllocateHostBuffer(bytes); };
  KILN_ASSIGN_OR_RETURN(auto prefetch, data::Prefetcher::Create(m.recipe, m.todo, popts));
  ImageJobSummary sum;
  ImageJobProgress p;
  p.total = static_cast<int64_t>(m.todo.size());
  std::vector<NamedTensor> outputs;
  while (data::Batch* b = prefetch->Next()) {
    KILN_RETURN_IF_ERROR(m.RunBatch(b, *prefetch, &outputs, &sum.compute_s));
    const auto t_write = Clock::now();
    KILN_RETURN_IF_ERROR(m.writer->Flush());
    sum.write_s += Since(t_write);
    const int64_t n = static_cast<int64_t>(b->good.size() + b->failed.size());
    p.done += n;
    p.failed += static_cast<int64_t>(b->failed.size());
    prefetch->Release(b);
    p.elapsed_s = Since(t_work);
    if (sum.first_batch_images == 0) {
      sum.first_batch_s = p.elapsed_s;
      sum.first_batch_images = n;
    }
    if (progress) progress(p);
  }
  sum.work_s = Since(t_work);
  sum.done = p.done;
  sum.failed = p.failed;
  sum.ok = p.done - p.failed;
  sum.skipped = m.plan.skipped;
  sum.images_per_s = sum.work_s > 0 ? sum.done / sum.work_s : 0;
  const double steady_s = sum.work_s - sum.first_batch_s;
  if (sum.done > sum.first_batch_images && steady_s > 0)
    sum.steady_images_per_s = (sum.done - sum.first_batch_images) / steady_s;
  const data::PrefetchStats st = prefetch->stats();
  sum.read_s = st.preprocess.read_s;
  sum.decode_s = st.preprocess.decode_s;
  sum.transform_s = st.preprocess.transform_s;
  sum.wait_s = st.wait_s;
  sum.workers = m.plan.workers;
  sum.records = m.options.out;
  return sum;
}

struct ImageTensorReader::Impl {
  std::vector<std::string> files;
  data::Recipe recipe;
  std::unique_ptr<data::Preprocessor> pre;
};

ImageTensorReader::ImageTensorReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ImageTensorReader::~ImageTensorReader() = default;

StatusOr<std::unique_ptr<ImageTensorReader>> ImageTensorReader::Create(const std::string& images,
                                                                       const std::string& recipe,
                                                                       const TensorSpec& input) {
  auto impl = std::make_unique<Impl>();
  if (input.dims.size() != 4)
    return InvalidArgument("images need a [N,C,H,W] model input; got " + input.ToString());
  KILN_ASSIGN_OR_RETURN(impl->files, data::ListImages(images));
  KILN_ASSIGN_OR_RETURN(impl->recipe, data::RecipeForInput(recipe, input.dims));
  KILN_ASSIGN_OR_RETURN(impl->pre, data::Preprocessor::Create(impl->recipe));
  const Shape sample = impl->pre->OutputShape();
  for (size_t d = 0; d < 3; ++d)
    if (input.dims[d + 1] > 0 && input.dims[d + 1] != sample[d])
      return InvalidArgument("recipe '" + impl->recipe.name + "' makes images of " +
                             ShapeToString(sample) + " but input is " + input.ToString());
  return std::unique_ptr<ImageTensorReader>(new ImageTensorReader(std::move(impl)));
}

const std::vector<std::string>& ImageTensorReader::files() const { return impl_->files; }
const std::string& ImageTensorReader::recipe() const { return impl_->recipe.name; }

StatusOr<Tensor> ImageTensorReader::Read(const std::vector<std::string>& paths,
                                         std::vector<std::string>* failures) {
  const Shape sample = impl_->pre->OutputShape();
  const int64_t per = impl_->pre->OutputElements();
  std::vector<float> buf(static_cast<size_t>(per) * paths.size());
  int64_t k = 0;
  for (const auto& p : paths) {
    Status s = impl_->pre->RunFile(p, buf.data() + k * per);
    if (s.ok()) {
      ++k;
    } else if (failures != nullptr) {
      failures->push_back(p + ": " + s.message());
    }
  }
  Shape shape = {k};
  shape.insert(shape.end(), sample.begin(), sample.end());
  buf.resize(static_cast<size_t>(k * per));
  return Tensor::FromVector<float>(buf, shape);
}

}  // namespace kiln
