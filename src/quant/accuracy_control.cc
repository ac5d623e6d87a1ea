// RunAccuracyControl (kiln/quantize.h): `kiln quantize --max-drop`, keeping the most sensitive
// nodes float until the held-out score is within the budget.
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <filesystem>

#include "kiln/quantize.h"
#include "kiln/tensor_io.h"
#include "quant/rows.h"

namespace kiln {
namespace {

using quant::Rows;

std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  return buf;
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
  HeldOutScore(const QuantizeJob& job, std::string input, Tensor x, std::vector<int64_t> labels)
      : job_(job), input_(std::move(input)), x_(std::move(x)), labels_(std::move(labels)) {}

  Status Init() {
    KILN_ASSIGN_OR_RETURN(ref_, Argmax(job_.model, x_));
    if (!labels_.empty() && ref_.size() != labels_.size())
      return InvalidArgument("--labels gives one class per sample; the model's first output has " +
                             std::to_string(ref_.size() / labels_.size()) +
                             " argmax positions per sample");
    return OkStatus();
  }
  double float_score() const { return labels_.empty() ? 100.0 : Percent(ref_, labels_); }
  StatusOr<double> Of(const std::string& model) const {
    KILN_ASSIGN_OR_RETURN(auto got, Argmax(model, x_));
    return Percent(got, labels_.empty() ? ref_ : labels_);
  }
  // Agreement with float32 on the first `rows` rows (for ranking nodes).
  StatusOr<double> AgreementOn(const std::string& model, int64_t rows) const {
    const Tensor probe = Rows(x_, 0, std::min(rows, x_.shape()[0]));
    KILN_ASSIGN_OR_RETURN(auto got, Argmax(model, probe));
    return Percent(got, std::vector<int64_t>(ref_.begin(), ref_.begin() + got.size()));
  }
  const char* what() const { return labels_.empty() ? "argmax agreement with float32" : "top-1"; }

 private:
  StatusOr<std::vector<int64_t>> Argmax(const std::string& model, const Tensor& x) const {
    return ArgmaxRows(model, input_, x, job_.batch, job_.options.num_threads);
  }
  static double Percent(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    int64_t same = 0;
    for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
    return 100.0 * static_cast<double>(same) / static_cast<double>(std::max<size_t>(1, a.size()));
  }
  const QuantizeJob& job_;
  std::string input_;
  Tensor x_;
  std::vector<int64_t> labels_, ref_;
};

// The classes of rows [n, n + m) of the labels (job.labels_tensor, or the job.labels file),
// which have one per row of `rows`.
StatusOr<std::vector<int64_t>> HeldOutLabels(const QuantizeJob& job, int64_t rows, int64_t n,
                                             int64_t m) {
  std::vector<int64_t> labels;
  if (job.labels.empty() && !job.labels_tensor.defined()) return labels;
  if (!job.labels.empty() && job.labels_tensor.defined())
    return InvalidArgument("labels are given twice, as --labels '" + job.labels +
                           "' and as an in-memory tensor; give one of them");
  Tensor lt = job.labels_tensor;
  if (!job.labels.empty()) {
    KILN_ASSIGN_OR_RETURN(lt, ReadTensorFile(job.labels));
  }
  if (lt.numel() != rows || (lt.dtype() != DataType::kInt64 && lt.dtype() != DataType::kInt32))
    return InvalidArgument(std::string(job.labels.empty() ? "labels" : "--labels") +
                           " must hold one int64/int32 class per sample (" + std::to_string(rows) +
                           "); got " + DataTypeName(lt.dtype()) + ShapeToString(lt.shape()));
  for (int64_t i = n; i < n + m; ++i)
    labels.push_back(lt.dtype() == DataType::kInt64 ? lt.data<int64_t>()[i]
                                                    : lt.data<int32_t>()[i]);
  return labels;
}

// The search: re-quantizes from the run's cache with more nodes float, scores the candidates.
class Search {
 public:
  Search(const QuantizeJob& job, QuantizeRun* run, const HeldOutScore& score,
         const QuantizeProgress& progress, AccuracyControlResult* result)
      : job_(job), run_(run), score_(score), progress_(progress), r_(*result) {}

  Status RankNodes();
  Status FewestFloat();

 private:
  void Report(const std::string& text) const {
    if (progress_.report) progress_.report(text);
  }
  StatusOr<QuantizeSummary> Write(const std::vector<std::string>& keep, const std::string& path,
                                  bool probe);
  StatusOr<double> TryK(size_t k);

  const QuantizeJob& job_;
  QuantizeRun* run_;
  const HeldOutScore& score_;
  const QuantizeProgress& progress_;
  AccuracyControlResult& r_;
  size_t written_ = 0;  // the k of the model now at job.out, and its drop
  double last_drop_ = 0;
};

// Writes the model with `keep` (besides the job's keep_float) float to `path`. The per-node
// sensitivity probes skip bias correction (one more pass over the data for each of them); the
// candidates scored on the held-out set have it when the job's options do.
StatusOr<QuantizeSummary> Search::Write(const std::vector<std::string>& keep,
                                        const std::string& path, bool probe) {
  if (progress_.cancelled && progress_.cancelled())
    return Status(StatusCode::kCancelled, "accuracy control cancelled");
  QuantizeOptions options = job_.options;
  options.keep_float.insert(options.keep_float.end(), keep.begin(), keep.end());
  if (probe) options.bias_correction = false;
  KILN_ASSIGN_OR_RETURN(run_->quantizer, Quantizer::Create(job_.model, options));
  Quantizer* q = run_->quantizer.get();
  KILN_ASSIGN_OR_RETURN(bool hit, q->UseCache(run_->cache, run_->samples->key()));
  if (!hit) return Internal("the calibration cache '" + run_->cache + "' was not reused");
  std::vector<std::string> ignored;
  KILN_RETURN_IF_ERROR(Calibrate(run_->samples.get(), q, job_.batch, &ignored, progress_));
  return q->Write(path);
}

// Each quantized node alone int8 on job.batch held-out rows: the most sensitive first.
Status Search::RankNodes() {
  const std::vector<std::string> nodes = run_->summary.quantized_nodes;
  const std::string probe_path = job_.out + ".probe.onnx";
  struct Remove {
    std::string path;
    ~Remove() {
      std::error_code ec;
      std::filesystem::remove(path, ec);
    }
  } remove_probe{probe_path};
  Report(Format("  sensitivity of %zu int8 nodes, each alone, on %lld samples:", nodes.size(),
                static_cast<long long>(std::min(r_.eval_samples, job_.batch))));
  for (const auto& node : nodes) {
    std::vector<std::string> others;
    for (const auto& o : nodes)
      if (o != node) others.push_back(o);
    KILN_RETURN_IF_ERROR(Write(others, probe_path, /*probe=*/true).status());
    KILN_ASSIGN_OR_RETURN(double agree, score_.AgreementOn(probe_path, job_.batch));
    r_.sensitivity.emplace_back(node, 100.0 - agree);
    Report(".");
  }
  std::stable_sort(r_.sensitivity.begin(), r_.sensitivity.end(),
                   [](const auto& x, const auto& y) { return x.second > y.second; });
  std::string line = "\n  most sensitive:";
  for (size_t i = 0; i < r_.sensitivity.size() && i < 8; ++i)
    line += Format(" %s (%.2f %%)", r_.sensitivity[i].first.c_str(), r_.sensitivity[i].second);
  Report(line + "\n");
  return OkStatus();
}

// drop(k): the k most sensitive nodes float, written to job.out and scored.
StatusOr<double> Search::TryK(size_t k) {
  written_ = k;
  std::vector<std::string> keep;
  for (size_t i = 0; i < k; ++i) keep.push_back(r_.sensitivity[i].first);
  KILN_ASSIGN_OR_RETURN(run_->summary, Write(keep, job_.out, /*probe=*/false));
  KILN_ASSIGN_OR_RETURN(double s, score_.Of(job_.out));
  Report(Format("  %zu most sensitive float: int8 %.2f %% (drop %.2f pt), %zu nodes int8\n", k, s,
                r_.float_score - s, run_->summary.quantized_nodes.size()));
  last_drop_ = r_.float_score - s;
  return last_drop_;
}

// The fewest most sensitive nodes float within the budget: doubling, then bisection.
// drop(0) = float - int8 is over the budget.
Status Search::FewestFloat() {
  const size_t nodes = r_.sensitivity.size();
  size_t lo = 0, hi = 1;  // drop(lo) over the budget; find hi within it
  while (true) {
    hi = std::min(hi, nodes - 1);
    if (hi <= lo)
      return InvalidArgument("--max-drop " + std::to_string(job_.max_drop) +
                             " not reached: it would keep every node float (" + job_.out +
                             ", the last candidate, has " +
                             std::to_string(run_->summary.quantized_nodes.size()) + " nodes int8)");
    KILN_ASSIGN_OR_RETURN(double d, TryK(hi));
    if (d <= job_.max_drop) break;
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    KILN_ASSIGN_OR_RETURN(double d, TryK(mid));
    (d <= job_.max_drop ? hi : lo) = mid;
  }
  KILN_ASSIGN_OR_RETURN(r_.drop, written_ == hi ? StatusOr<double>(last_drop_) : TryK(hi));
  r_.kept_float = hi;
  return OkStatus();
}

}  // namespace

StatusOr<AccuracyControlResult> RunAccuracyControl(const QuantizeJob& job, QuantizeRun* run,
                                                   const QuantizeProgress& progress) {
  const Tensor* data = run->samples->single();
  if (data == nullptr)
    return InvalidArgument(
        "--max-drop needs held-out samples of a one-input model: the rows after --samples of "
        "the tensor file given to --calibrate");
  const int64_t rows = data->shape()[0], n = run->samples->count();
  AccuracyControlResult r;
  r.eval_samples = std::min(rows - n, job.eval_samples);
  const int64_t m = r.eval_samples;
  if (m < 1)
    return InvalidArgument(
        "--max-drop evaluates on samples after the --samples used for calibration; " +
        (job.calibrate.empty() ? "the calibration " + run->samples->sources()[0]
                               : "'" + job.calibrate[0] + "'") +
        " has " + std::to_string(rows) + " rows, all used");
  KILN_ASSIGN_OR_RETURN(auto labels, HeldOutLabels(job, rows, n, m));
  HeldOutScore score(job, run->quantizer->inputs()[0].name, Rows(*data, n, n + m),
                     std::move(labels));
  KILN_RETURN_IF_ERROR(score.Init());
  r.measure = score.what();
  r.float_score = score.float_score();
  KILN_ASSIGN_OR_RETURN(r.int8_score, score.Of(job.out));
  r.drop = r.float_score - r.int8_score;
  if (progress.report)
    progress.report(
        Format("accuracy control on %lld held-out samples (%s): float32 %.2f %%, int8 %.2f %% "
               "(drop %.2f pt, allowed %.2f)\n",
               static_cast<long long>(m), score.what(), r.float_score, r.int8_score, r.drop,
               job.max_drop));
  if (r.drop <= job.max_drop) return r;
  Search search(job, run, score, progress, &r);
  KILN_RETURN_IF_ERROR(search.RankNodes());
  KILN_RETURN_IF_ERROR(search.FewestFloat());
  return r;
}

}  // namespace kiln
