// `kiln quantize MODEL --calibrate DATA --out OUT`: post-training INT8 quantization with
// calibration (kiln/quantize.h), writing a QDQ ONNX model.
//
// DATA is a tensor file (.npy, or ONNX .pb) holding calibration samples along dim 0, or image
// files (a directory or a list file, .txt/.lst) decoded through a recipe (--recipe, as `kiln run
// --images`), for a one-input model; a model with several inputs takes one tensor file per input,
// `--calibrate NAME=FILE` each, with as many samples each. --samples of them (a tensor file's
// first N; images spread evenly over the sorted list) run in batches of --batch, once per pass;
// images that fail to decode are skipped and reported.
#include "kiln/quantize.h"

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include "common.h"
#include "kiln/image_job.h"
#include "kiln/tensor_io.h"

namespace kiln::cli {
namespace {

struct QuantizeArgs {
  std::string model, out, cache, trt_cache, recipe;
  std::vector<std::string> calibrate;  // FILE, DIR, LIST, or NAME=FILE per input
  QuantizeOptions options;
  int64_t samples = 300;
  int64_t batch = 32;
  bool verbose = false;
  bool report = false;
  double max_drop = -1;  // accuracy control (percentage points); < 0: off
  std::string labels;
  int64_t eval_samples = 1000;
};

// Rows [begin, end) of `t` along dim 0, copied.
Tensor Rows(const Tensor& t, int64_t begin, int64_t end) {
  Shape shape = t.shape();
  const int64_t row = t.numel() / std::max<int64_t>(1, shape[0]);
  shape[0] = end - begin;
  Tensor out = Tensor::Empty(t.dtype(), shape);
  const size_t esz = DataTypeSize(t.dtype());
  std::memcpy(out.raw(), static_cast<const char*>(t.raw()) + begin * row * esz,
              static_cast<size_t>((end - begin) * row) * esz);
  return out;
}

bool IsImageSource(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return false;
  if (S_ISDIR(st.st_mode)) return true;
  for (const char* ext : {".txt", ".lst"})
    if (path.size() > 4 && path.compare(path.size() - 4, 4, ext) == 0) return true;
  return false;
}

// The --calibrate arguments as (input name, path): the name is empty for a lone FILE/DIR/LIST,
// which feeds a one-input model's input. NAME=FILE when NAME is one of `inputs`.
std::vector<std::pair<std::string, std::string>> CalibrationSources(
    const std::vector<std::string>& args, const std::vector<TensorSpec>& inputs) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& arg : args) {
    const size_t eq = arg.find('=');
    const std::string name = eq == std::string::npos ? "" : arg.substr(0, eq);
    const bool named = std::any_of(inputs.begin(), inputs.end(), [&](const TensorSpec& t) {
      return !name.empty() && t.name == name;
    });
    out.emplace_back(named ? name : "", named ? arg.substr(eq + 1) : arg);
  }
  return out;
}

// The calibration samples: rows of a tensor file per input, or images through a recipe.
class Samples {
 public:
  static StatusOr<std::unique_ptr<Samples>> Open(const QuantizeArgs& a,
                                                 const std::vector<TensorSpec>& inputs) {
    auto s = std::make_unique<Samples>();
    const auto sources = CalibrationSources(a.calibrate, inputs);
    const bool named = std::any_of(sources.begin(), sources.end(),
                                   [](const auto& src) { return !src.first.empty(); });
    if (!named) {
      if (sources.size() != 1)
        return InvalidArgument(
            "--calibrate is given " + std::to_string(sources.size()) +
            " times: a model with several inputs takes one tensor file per input as NAME=FILE");
      if (inputs.size() != 1) {
        std::string names;
        for (const auto& t : inputs) names += (names.empty() ? "" : ", ") + t.name;
        return Unsupported("calibration from one tensor file needs a one-input model; '" + a.model +
                           "' has " + std::to_string(inputs.size()) + " inputs (" + names +
                           "): give each as --calibrate NAME=FILE");
      }
      return OpenOne(a, inputs[0], sources[0].second, std::move(s));
    }
    // One tensor file per input.
    for (const auto& [name, path] : sources)
      if (name.empty())
        return InvalidArgument("--calibrate '" + path +
                               "' names no input of the model; with several sources each is "
                               "NAME=FILE, NAME one of the model's inputs");
    int64_t rows = -1;
    std::string key, first;
    for (const TensorSpec& in : inputs) {
      int given = 0;
      std::string path;
      for (const auto& src : sources)
        if (src.first == in.name) ++given, path = src.second;
      if (given != 1)
        return InvalidArgument("--calibrate: input '" + in.name + "' is given " +
                               std::to_string(given) + " times; every input needs one NAME=FILE");
      if (IsImageSource(path))
        return InvalidArgument("--calibrate " + in.name + "=" + path +
                               ": images calibrate one-input models only; give a tensor file");
      KILN_ASSIGN_OR_RETURN(Tensor t, ReadFile(path, in));
      if (rows >= 0 && t.shape()[0] != rows)
        return InvalidArgument("--calibrate: '" + path + "' (input '" + in.name + "') holds " +
                               std::to_string(t.shape()[0]) + " samples and '" + first + "' " +
                               std::to_string(rows) + "; every input needs as many");
      if (rows < 0) rows = t.shape()[0], first = path;
      s->data_.push_back({in.name, std::move(t)});
    }
    s->count_ = std::min<int64_t>(a.samples, rows);
    for (const auto& [name, t] : s->data_)
      key += name + "=" + CalibrationDataKey(t, s->count_) + "\n";
    s->key_ = CalibrationDataKey(
        Tensor::View(DataType::kUInt8, {static_cast<int64_t>(key.size())}, key.data()),
        static_cast<int64_t>(key.size()));
    s->what_ = std::to_string(s->count_) + " samples of " + std::to_string(s->data_.size()) +
               " tensor files (one per input)";
    return s;
  }
  int64_t count() const { return count_; }
  // The samples' tensor when there is one tensor file (nullptr for images or several files).
  const Tensor* single() const { return data_.size() == 1 ? &data_[0].tensor : nullptr; }
  const std::string& key() const { return key_; }
  const std::string& what() const { return what_; }
  // Up to `k` samples not used for calibration (rows after them; images next to them), or, when
  // there are none, the first k calibration samples; `held_out` says which.
  StatusOr<std::vector<NamedTensor>> HeldOut(int64_t k, bool* held_out) {
    if (!images_) {
      const int64_t rows = data_[0].tensor.shape()[0];
      *held_out = rows > count_;
      std::vector<NamedTensor> out;
      for (const auto& [name, t] : data_)
        out.push_back({name, *held_out ? Rows(t, count_, std::min(rows, count_ + k))
                                       : Rows(t, 0, std::min(count_, k))});
      return out;
    }
    const auto& files = images_->files();
    std::vector<std::string> pick;
    for (size_t i = 0; i < files.size() && static_cast<int64_t>(pick.size()) < k; ++i)
      if (std::find(paths_.begin(), paths_.end(), files[i]) == paths_.end())
        pick.push_back(files[i]);
    *held_out = !pick.empty();
    if (pick.empty()) pick.assign(paths_.begin(), paths_.begin() + std::min<int64_t>(k, count_));
    KILN_ASSIGN_OR_RETURN(Tensor t, images_->Read(pick, nullptr));
    return std::vector<NamedTensor>{{image_input_, std::move(t)}};
  }
  // Samples [b, e) of every input; images that fail are appended to `failures` (the batch then
  // has fewer rows).
  StatusOr<std::vector<NamedTensor>> Batch(int64_t b, int64_t e,
                                           std::vector<std::string>* failures) {
    std::vector<NamedTensor> out;
    if (!images_) {
      for (const auto& [name, t] : data_) out.push_back({name, Rows(t, b, e)});
      return out;
    }
    KILN_ASSIGN_OR_RETURN(Tensor t,
                          images_->Read({paths_.begin() + b, paths_.begin() + e}, failures));
    out.push_back({image_input_, std::move(t)});
    return out;
  }

 private:
  // A tensor file's samples, converted to the input's float type if need be.
  static StatusOr<Tensor> ReadFile(const std::string& path, const TensorSpec& in) {
    if (!std::filesystem::exists(path))
      return NotFound("calibration data '" + path + "' does not exist");
    KILN_ASSIGN_OR_RETURN(Tensor t, ReadTensorFile(path));
    if (t.rank() < 1 || t.shape()[0] < 1)
      return InvalidArgument("calibration data '" + path +
                             "' holds no sample (samples run along dim 0); got shape " +
                             ShapeToString(t.shape()));
    if (t.dtype() != in.dtype) {
      KILN_ASSIGN_OR_RETURN(t, ConvertFloatTensor(t, in.dtype));
    }
    return t;
  }

  static StatusOr<std::unique_ptr<Samples>> OpenOne(const QuantizeArgs& a, const TensorSpec& in,
                                                    const std::string& source,
                                                    std::unique_ptr<Samples> s) {
    if (IsImageSource(source)) {
      s->image_input_ = in.name;
      KILN_ASSIGN_OR_RETURN(s->images_, ImageTensorReader::Create(source, a.recipe, in));
      const auto& files = s->images_->files();
      const int64_t total = static_cast<int64_t>(files.size());
      const int64_t n = std::min<int64_t>(a.samples, total);
      std::string key = "recipe " + s->images_->recipe();
      for (int64_t i = 0; i < n; ++i) {  // spread over the list (folders are often by class)
        s->paths_.push_back(files[static_cast<size_t>(i * total / n)]);
        struct stat st {};
        stat(s->paths_.back().c_str(), &st);
        key += "\n" + s->paths_.back() + " " + std::to_string(st.st_size) + " " +
               std::to_string(st.st_mtime);
      }
      s->count_ = n;
      s->key_ = CalibrationDataKey(
          Tensor::View(DataType::kUInt8, {static_cast<int64_t>(key.size())}, key.data()),
          static_cast<int64_t>(key.size()));
      s->what_ = std::to_string(n) + " of " + std::to_string(total) + " images in '" + source +
                 "' (recipe " + s->images_->recipe() + ")";
      return s;
    }
    KILN_ASSIGN_OR_RETURN(Tensor t, ReadFile(source, in));
    s->count_ = std::min<int64_t>(a.samples, t.shape()[0]);
    s->key_ = CalibrationDataKey(t, s->count_);  // as before several inputs were taken
    s->what_ = std::to_string(s->count_) + " samples of '" + source + "'";
    s->data_.push_back({in.name, std::move(t)});
    return s;
  }

  std::unique_ptr<ImageTensorReader> images_;
  std::string image_input_;
  std::vector<std::string> paths_;
  std::vector<NamedTensor> data_;  // one tensor file per input
  int64_t count_ = 0;
  std::string key_, what_;
};

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// Runs every pass of `q` over the samples; images that fail (first pass) go to `failures`.
Status Calibrate(const QuantizeArgs& a, Samples* samples, Quantizer* q,
                 std::vector<std::string>* failures) {
  const int64_t n = samples->count();
  const bool tty = isatty(2) != 0;  // a progress line only on a terminal
  for (int pass = 0; pass < q->passes(); ++pass) {
    KILN_RETURN_IF_ERROR(q->BeginPass(pass));
    for (int64_t b = 0; b < n; b += a.batch) {
      const int64_t e = std::min(n, b + a.batch);
      KILN_ASSIGN_OR_RETURN(auto batch, samples->Batch(b, e, pass == 0 ? failures : nullptr));
      if (batch[0].tensor.shape()[0] == 0) continue;  // every image of this batch failed
      Status s = q->Observe(batch);
      if (!s.ok())
        return Status(s.code(), s.message() + "\n  while calibrating on samples " +
                                    std::to_string(b) + ".." + std::to_string(e - 1) + " of " +
                                    Joined(a.calibrate));
      if (tty)
        std::fprintf(stderr, "\rcalibration pass %d/%d: %lld/%lld samples", pass + 1, q->passes(),
                     static_cast<long long>(e), static_cast<long long>(n));
    }
    std::fprintf(stderr, "%scalibration pass %d/%d: %lld samples\n", tty ? "\r" : "", pass + 1,
                 q->passes(), static_cast<long long>(n));
  }
  return OkStatus();
}

// Argmax over the last axis of `model`'s first output on the rows of `x`, in order: one index
// per sample for a [N, classes] output, one per time step for a [N, T, symbols] one.
StatusOr<std::vector<int64_t>> ArgmaxRows(const std::string& model, const std::string& input,
                                          const Tensor& x, int64_t batch, int threads) {
  SessionOptions so;
  so.num_threads = threads;
  KILN_ASSIGN_OR_RETURN(auto session, Session::Load(model, so));
  std::vector<int64_t> idx;
  const int64_t n = x.shape()[0];
  for (int64_t b = 0; b < n; b += batch) {
    const int64_t e = std::min(n, b + batch);
    std::vector<NamedTensor> out;
    KILN_RETURN_IF_ERROR(session->Run({{input, Rows(x, b, e)}}, &out));
    const Tensor& y = out[0].tensor;
    if (y.dtype() != DataType::kFloat || y.rank() < 2 || y.shape()[0] != e - b)
      return InvalidArgument(
          "--max-drop compares the argmax over the last axis of a float32 output of "
          "shape [N, ..., classes]; got " +
          ShapeToString(y.shape()));
    const int64_t k = y.shape().back();
    for (int64_t r = 0; r < y.numel() / k; ++r) {
      const float* row = y.data<float>() + r * k;
      idx.push_back(std::max_element(row, row + k) - row);
    }
  }
  return idx;
}

// Accuracy control's measure on held-out rows: with labels, top-1 (%) against them; without,
// the share (%) of argmax positions equal to the float32 model's (a classifier's class, a CTC
// recognizer's symbol per time step), so the float32 model scores 100.
class HeldOutScore {
 public:
  HeldOutScore(const QuantizeArgs& a, std::string input, Tensor x, std::vector<int64_t> labels)
      : a_(a), input_(std::move(input)), x_(std::move(x)), labels_(std::move(labels)) {}

  Status Init() {
    KILN_ASSIGN_OR_RETURN(ref_, Argmax(a_.model, x_));
    if (!labels_.empty() && ref_.size() != labels_.size())
      return InvalidArgument("--labels gives one class per sample; the model's first output has " +
                             std::to_string(ref_.size() / labels_.size()) +
                             " argmax positions per sample");
    return OkStatus();
  }
  double float_score() const { return labels_.empty() ? 100.0 : Percent(ref_, labels_); }
  StatusOr<double> Of(const std::string& model) const { return Of(model, x_); }
  // Agreement with float32 on the first rows of `probe` (for ranking nodes).
  StatusOr<double> AgreementOn(const std::string& model, int64_t rows) const {
    const Tensor probe = Rows(x_, 0, std::min(rows, x_.shape()[0]));
    KILN_ASSIGN_OR_RETURN(auto got, Argmax(model, probe));
    return Percent(got, std::vector<int64_t>(ref_.begin(), ref_.begin() + got.size()));
  }
  const char* what() const { return labels_.empty() ? "argmax agreement with float32" : "top-1"; }

 private:
  StatusOr<std::vector<int64_t>> Argmax(const std::string& model, const Tensor& x) const {
    return ArgmaxRows(model, input_, x, a_.batch, a_.options.num_threads);
  }
  StatusOr<double> Of(const std::string& model, const Tensor& x) const {
    KILN_ASSIGN_OR_RETURN(auto got, Argmax(model, x));
    return Percent(got, labels_.empty() ? ref_ : labels_);
  }
  static double Percent(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    int64_t same = 0;
    for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
    return 100.0 * static_cast<double>(same) / static_cast<double>(std::max<size_t>(1, a.size()));
  }
  const QuantizeArgs& a_;
  std::string input_;
  Tensor x_;
  std::vector<int64_t> labels_, ref_;
};

// --max-drop: each quantized node's sensitivity is measured alone (only it int8, on up to
// --batch held-out samples: how far the argmax agreement with float32 falls); then the fewest
// most sensitive nodes are kept float (found by doubling, then bisection, each candidate
// re-quantized from the calibration cache and scored on all held-out samples) so that the drop
// is within the budget.
Status AccuracyControl(const QuantizeArgs& a, const TensorSpec& in, Samples* samples,
                       const std::string& cache, std::unique_ptr<Quantizer>* q,
                       QuantizeSummary* summary) {
  const Tensor* data = samples->single();
  if (data == nullptr)
    return InvalidArgument(
        "--max-drop needs held-out samples of a one-input model: the rows after --samples of "
        "the tensor file given to --calibrate");
  const int64_t rows = data->shape()[0], n = samples->count();
  const int64_t m = std::min(rows - n, a.eval_samples);
  if (m < 1)
    return InvalidArgument(
        "--max-drop evaluates on samples after the --samples used for calibration; '" +
        a.calibrate[0] + "' has " + std::to_string(rows) + " rows, all used");
  std::vector<int64_t> labels;
  if (!a.labels.empty()) {
    KILN_ASSIGN_OR_RETURN(Tensor lt, ReadTensorFile(a.labels));
    if (lt.numel() != rows || (lt.dtype() != DataType::kInt64 && lt.dtype() != DataType::kInt32))
      return InvalidArgument("--labels must hold one int64/int32 class per sample (" +
                             std::to_string(rows) + "); got " + DataTypeName(lt.dtype()) +
                             ShapeToString(lt.shape()));
    for (int64_t i = n; i < n + m; ++i)
      labels.push_back(lt.dtype() == DataType::kInt64 ? lt.data<int64_t>()[i]
                                                      : lt.data<int32_t>()[i]);
  }
  HeldOutScore score(a, in.name, Rows(*data, n, n + m), std::move(labels));
  KILN_RETURN_IF_ERROR(score.Init());
  const double base = score.float_score();
  KILN_ASSIGN_OR_RETURN(double cur, score.Of(a.out));
  std::printf(
      "accuracy control on %lld held-out samples (%s): float32 %.2f %%, int8 %.2f %% "
      "(drop %.2f pt, allowed %.2f)\n",
      static_cast<long long>(m), score.what(), base, cur, base - cur, a.max_drop);
  if (base - cur <= a.max_drop) {
    std::printf("accuracy control: within %.2f pt; wrote %s\n", a.max_drop, a.out.c_str());
    return OkStatus();
  }

  // Writes the model with `keep` (besides the user's --keep-float) float to `path`. The
  // per-node sensitivity probes skip bias correction (one more pass over the data for each of
  // them); the candidates scored on the held-out set have it when the user's options do.
  auto write = [&](const std::vector<std::string>& keep, const std::string& path,
                   bool probe = false) -> StatusOr<QuantizeSummary> {
    QuantizeOptions options = a.options;
    options.keep_float.insert(options.keep_float.end(), keep.begin(), keep.end());
    if (probe) options.bias_correction = false;
    KILN_ASSIGN_OR_RETURN(*q, Quantizer::Create(a.model, options));
    KILN_ASSIGN_OR_RETURN(bool hit, (*q)->UseCache(cache, samples->key()));
    if (!hit) return Internal("the calibration cache '" + cache + "' was not reused");
    std::vector<std::string> ignored;
    KILN_RETURN_IF_ERROR(Calibrate(a, samples, q->get(), &ignored));
    return (*q)->Write(path);
  };
  const std::vector<std::string> nodes = summary->quantized_nodes;
  const std::string probe_path = a.out + ".probe.onnx";
  struct Remove {
    std::string path;
    ~Remove() { std::filesystem::remove(path); }
  } remove_probe{probe_path};
  std::vector<std::pair<double, std::string>> sensitivity;
  std::printf("  sensitivity of %zu int8 nodes, each alone, on %lld samples:", nodes.size(),
              static_cast<long long>(std::min(m, a.batch)));
  for (const auto& node : nodes) {
    std::vector<std::string> others;
    for (const auto& o : nodes)
      if (o != node) others.push_back(o);
    KILN_RETURN_IF_ERROR(write(others, probe_path, /*probe=*/true).status());
    KILN_ASSIGN_OR_RETURN(double agree, score.AgreementOn(probe_path, a.batch));
    sensitivity.emplace_back(100.0 - agree, node);
    std::printf(".");
    std::fflush(stdout);
  }
  std::stable_sort(sensitivity.begin(), sensitivity.end(),
                   [](const auto& x, const auto& y) { return x.first > y.first; });
  std::printf("\n  most sensitive:");
  for (size_t i = 0; i < sensitivity.size() && i < 8; ++i)
    std::printf(" %s (%.2f %%)", sensitivity[i].second.c_str(), sensitivity[i].first);
  std::printf("\n");
  // drop(k): the k most sensitive nodes float. drop(0) = base - cur is over the budget.
  size_t written = 0;  // the k of the model now at a.out, and its drop
  double last_drop = 0;
  auto try_k = [&](size_t k) -> StatusOr<double> {
    written = k;
    std::vector<std::string> keep;
    for (size_t i = 0; i < k; ++i) keep.push_back(sensitivity[i].second);
    KILN_ASSIGN_OR_RETURN(*summary, write(keep, a.out));
    KILN_ASSIGN_OR_RETURN(double s, score.Of(a.out));
    std::printf("  %zu most sensitive float: int8 %.2f %% (drop %.2f pt), %zu nodes int8\n", k, s,
                base - s, summary->quantized_nodes.size());
    last_drop = base - s;
    return last_drop;
  };
  size_t lo = 0, hi = 1;  // drop(lo) over the budget; find hi within it
  while (true) {
    hi = std::min(hi, nodes.size() - 1);
    if (hi <= lo)
      return InvalidArgument("--max-drop " + std::to_string(a.max_drop) +
                             " not reached: it would keep every node float (" + a.out +
                             ", the last candidate, has " +
                             std::to_string(summary->quantized_nodes.size()) + " nodes int8)");
    KILN_ASSIGN_OR_RETURN(double d, try_k(hi));
    if (d <= a.max_drop) break;
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    KILN_ASSIGN_OR_RETURN(double d, try_k(mid));
    (d <= a.max_drop ? hi : lo) = mid;
  }
  KILN_ASSIGN_OR_RETURN(double d, written == hi ? StatusOr<double>(last_drop) : try_k(hi));
  std::printf("accuracy control: %zu nodes kept float, drop %.2f pt within %.2f; wrote %s\n", hi, d,
              a.max_drop, a.out.c_str());
  return OkStatus();
}

Status RunQuantize(const QuantizeArgs& a) {
  if (a.samples < 1)
    return InvalidArgument("--samples must be >= 1; got " + std::to_string(a.samples));
  if (a.batch < 1) return InvalidArgument("--batch must be >= 1; got " + std::to_string(a.batch));
  // A missing file is reported before any work on the model.
  for (const auto& arg : a.calibrate) {
    const size_t eq = arg.find('=');
    const std::string path =
        std::filesystem::exists(arg) || eq == std::string::npos ? arg : arg.substr(eq + 1);
    if (!IsImageSource(path) && !std::filesystem::exists(path))
      return NotFound("calibration data '" + path + "' does not exist");
  }
  KILN_ASSIGN_OR_RETURN(auto q, Quantizer::Create(a.model, a.options));
  KILN_ASSIGN_OR_RETURN(auto samples, Samples::Open(a, q->inputs()));
  const TensorSpec in = q->inputs()[0];  // Open refused a model without inputs
  const int64_t n = samples->count();
  std::fprintf(stderr, "calibration data: %s\n", samples->what().c_str());
  std::vector<std::string> failures;
  // Accuracy control re-quantizes with more nodes kept float: from a cache, without calibrating.
  std::string cache = a.cache;
  if (cache.empty() && a.max_drop >= 0)
    cache = (std::filesystem::temp_directory_path() /
             ("kiln_quantize_" + std::to_string(getpid()) + ".json"))
                .string();
  struct Cleanup {
    std::string path;
    ~Cleanup() {
      if (!path.empty()) std::filesystem::remove(path);
    }
  } cleanup{a.cache.empty() ? cache : ""};
  if (!cache.empty()) {
    KILN_ASSIGN_OR_RETURN(bool hit, q->UseCache(cache, samples->key()));
    if (!a.cache.empty())
      std::fprintf(stderr,
                   hit ? "calibration cache %s: ranges read, no calibration\n"
                       : "calibration cache %s: none yet, written after calibrating\n",
                   a.cache.c_str());
  }
  const auto t0 = std::chrono::steady_clock::now();
  KILN_RETURN_IF_ERROR(Calibrate(a, samples.get(), q.get(), &failures));
  if (!failures.empty()) {
    std::fprintf(stderr, "%zu of %lld calibration images could not be read and were skipped:\n",
                 failures.size(), static_cast<long long>(n));
    for (size_t i = 0; i < failures.size() && i < 5; ++i)
      std::fprintf(stderr, "  %s\n", failures[i].c_str());
    if (failures.size() > 5) std::fprintf(stderr, "  ...\n");
    if (static_cast<int64_t>(failures.size()) == n)
      return InvalidArgument("none of the " + std::to_string(n) + " calibration images decoded");
  }
  KILN_ASSIGN_OR_RETURN(QuantizeSummary s, q->Write(a.out));
  if (!a.trt_cache.empty()) KILN_RETURN_IF_ERROR(q->WriteTensorRtCache(a.trt_cache));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("quantized %zu nodes to int8 (%s, %lld samples, weights %s) in %.1f s\n",
              s.quantized_nodes.size(), s.method.c_str(), static_cast<long long>(s.samples),
              s.per_channel ? "per channel" : "per tensor", secs);
  if (s.converted_from_opset != 0) {
    std::printf("  converted from opset %lld to 13 (%s)",
                static_cast<long long>(s.converted_from_opset),
                s.converted_from_opset < 10 ? "QuantizeLinear needs opset 10, per-channel scales 13"
                                            : "per-channel weight scales need it");
    if (s.conversion_max_diff >= 0)
      std::printf("; both forms run on the first calibration batch: outputs within %.2g",
                  s.conversion_max_diff);
    std::printf("\n");
  }
  if (!s.per_channel)
    std::printf("  weights per tensor: opset < 13 and %s\n", s.per_tensor_reason.c_str());
  if (s.bias_corrected > 0) std::printf("  bias corrected: %d convolutions\n", s.bias_corrected);
  if (s.method == "auto") {
    std::map<std::string, int> kept;
    for (const auto& t : s.activations)
      if (!t.method.empty()) ++kept[t.method];
    std::string counts;
    for (const auto& [m, n] : kept) counts += " " + m + " " + std::to_string(n);
    if (s.auto_evaluations > 0)
      std::printf(
          "  auto: thresholds kept per tensor:%s (%d quantized models tried on %lld samples; "
          "output error %.4g -> %.4g)\n",
          counts.c_str(), s.auto_evaluations, static_cast<long long>(s.auto_samples),
          s.auto_error_start, s.auto_error);
    else
      std::printf("  auto: thresholds kept per tensor:%s (from the cache)\n", counts.c_str());
  }
  const std::pair<int, const char*> shared_lines[] = {
      {s.shared_concats, "Concat(s) take their output's scale on every input"},
      {s.shared_pools, "MaxPool(s) after a quantized convolution pool 8-bit values"},
      {s.shared_averages, "AveragePool(s) average 8-bit values (with their input's scale)"},
      {s.shared_moves, "Split/Resize/Reshape/Transpose-like op(s) move 8-bit values"},
      {s.widened_scales, "activation scale(s) widened to their group's"}};
  for (const auto& [count, what] : shared_lines)
    if (count > 0) std::printf("  shared scales: %d %s\n", count, what);
  if (s.zero_point_activations > 0)
    std::printf(
        "  %d activation(s) uint8 with a zero point (negative side under half the positive)\n",
        s.zero_point_activations);
  if (s.quantized_adds > 0)
    std::printf("  int8 residual stream: %d Add(s) with both inputs quantized\n", s.quantized_adds);
  if (a.options.channel_activations) {
    int channel_scaled = 0;
    for (const auto& t : s.activations) channel_scaled += !t.channel_scales.empty();
    std::printf("  per-channel activation scales: %d depthwise convolution inputs\n",
                channel_scaled);
  }
  for (const auto& [node, why] : s.float_nodes)
    std::printf("  kept float: %s: %s\n", node.c_str(), why.c_str());
  if (a.verbose) {
    std::printf("  %-40s %-6s %12s %12s %12s %12s\n", "activation", "type", "min", "max",
                "threshold", "scale");
    for (const auto& t : s.activations)
      std::printf(
          "  %-40s %-6s %12.5g %12.5g %12.5g %12.5g%s%s\n", t.tensor.c_str(), t.dtype.c_str(),
          t.min, t.max, t.threshold, t.scale, t.method.empty() ? "" : (" " + t.method).c_str(),
          t.channel_scales.empty()
              ? ""
              : (" (largest of " + std::to_string(t.channel_scales.size()) + " per-channel scales)")
                    .c_str());
  }
  std::printf("wrote %s (%lld bytes)\n", a.out.c_str(), static_cast<long long>(s.model_bytes));
  if (a.report) {
    bool held_out = false;
    KILN_ASSIGN_OR_RETURN(auto hold, samples->HeldOut(a.batch, &held_out));
    KILN_ASSIGN_OR_RETURN(auto errs, q->Compare(hold));
    std::printf("report: float32 vs int8 on %s, per quantized node (errors accumulate):\n",
                held_out ? "held-out samples" : "calibration samples (no held-out data)");
    std::printf("  %-44s %10s %12s %12s\n", "node output", "cosine", "max |diff|", "max |ref|");
    for (const auto& e : errs)
      std::printf("  %-44s %10.6f %12.5g %12.5g\n",
                  (e.node == "(model output)" ? "(model output) " + e.tensor : e.node).c_str(),
                  e.cosine, e.max_abs, e.max_ref);
  }
  if (!a.trt_cache.empty())
    std::printf("wrote %s (TensorRT calibration table)\n", a.trt_cache.c_str());
  if (a.max_drop >= 0) KILN_RETURN_IF_ERROR(AccuracyControl(a, in, samples.get(), cache, &q, &s));
  return OkStatus();
}

}  // namespace

void AddQuantizeCommand(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "Quantize a float32 model to INT8 (QDQ ONNX) with calibration data");
  cmd->add_option("model", a->model, "The float32 ONNX model")->required();
  cmd->add_option("--calibrate", a->calibrate,
                  "Calibration samples: a tensor file (.npy or .pb) with samples along dim 0, or "
                  "images: a directory or a list file (.txt/.lst); for a model with several "
                  "inputs NAME=FILE once per input (tensor files with as many samples each)")
      ->required();
  cmd->add_option("--out", a->out, "Where to write the QDQ model")->required();
  cmd->add_option("--recipe", a->recipe,
                  "For image calibration data: a preset or recipe .json (as kiln run --images; "
                  "default: torchvision-imagenet sized to the input)");
  cmd->add_option("--method", a->options.method,
                  "Range method: minmax, percentile, entropy (KL), mse, or auto (per tensor the "
                  "one whose quantized model is closest to float on the first batch; slower)")
      ->capture_default_str();
  cmd->add_option("--percentile", a->options.percentile, "For --method percentile")
      ->capture_default_str();
  cmd->add_option("--samples", a->samples, "Calibration samples used (the first N)")
      ->capture_default_str();
  cmd->add_option("--batch", a->batch, "Samples per calibration run")->capture_default_str();
  cmd->add_option("--keep-float", a->options.keep_float,
                  "Keep nodes float32: a node name, an op type, or a name pattern (* ?); "
                  "repeatable");
  cmd->add_flag("--quantize-all", a->options.quantize_all,
                "Also quantize the first and last layers (kept float by default)");
  cmd->add_flag("--channel-activations", a->options.channel_activations,
                "Depthwise convolutions' inputs get one scale per channel (Q/DQ axis 1), for "
                "channels whose ranges differ widely; ONNX Runtime and TensorRT run those "
                "convolutions float");
  cmd->add_flag("!--no-shared-concat-scales", a->options.share_concat_scales,
                "Leave Concats, MaxPools, Splits, nearest Resizes, Reshapes and Transposes float "
                "instead of giving the tensors they connect one scale (shared when only "
                "quantized nodes read them)");
  cmd->add_flag("!--float-adds", a->options.quantize_adds,
                "Leave residual Adds float (by default both inputs of an Add after a quantized "
                "convolution are quantized, so the residual stream stays int8)");
  cmd->add_flag("!--symmetric-activations", a->options.asymmetric_activations,
                "Quantize every activation calibration saw negative as int8 symmetric (default: "
                "uint8 with a zero point where the negative side is under half the positive, "
                "as after SiLU or HardSwish)");
  cmd->add_option("--threads", a->options.num_threads, "Threads (0 = physical cores)")
      ->capture_default_str();
  cmd->add_option("--cache", a->cache,
                  "Calibration cache (JSON): read when it matches this model, data, method and "
                  "kiln version (no calibration); refused when it differs; written when absent");
  cmd->add_option("--trt-cache", a->trt_cache,
                  "Also write the activation scales as a TensorRT calibration table");
  cmd->add_flag("--bias-correction,!--no-bias-correction", a->options.bias_correction,
                "Fast bias correction (default on): one more pass shifts each quantized "
                "convolution's bias by the mean difference (per channel) of its float and int8 "
                "outputs on the float model's input to it; --no-bias-correction skips the pass");
  cmd->add_option("--max-drop", a->max_drop,
                  "Accuracy control: keep the most sensitive nodes float until the held-out score "
                  "drops at most this many points: top-1 with --labels, else the argmax agreement "
                  "(%) with float32 over the first output's last axis")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--labels", a->labels,
                  "For --max-drop: a .npy of one class per row of the --calibrate tensor file; "
                  "the rows after --samples (up to --eval-samples) are the held-out set either "
                  "way");
  cmd->add_option("--eval-samples", a->eval_samples, "For --max-drop")->capture_default_str();
  cmd->add_flag("--report", a->report,
                "Compare each quantized node's output and the model's outputs, float32 against "
                "int8, on --batch held-out samples (cosine, max abs difference)");
  cmd->add_flag("--verbose,-v", a->verbose, "Print every activation's range and scale");
  cmd->callback([a, exit_code] {
    Status s = RunQuantize(*a);
    if (!s.ok()) *exit_code = Fail(s);
  });
}

}  // namespace kiln::cli
