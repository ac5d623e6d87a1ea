// CalibrationSamples (kiln/quantize.h): rows of a tensor file per input, or images through a
// recipe; and Calibrate, every pass of a Quantizer over them.
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "kiln/image_job.h"
#include "kiln/quantize.h"
#include "kiln/tensor_io.h"
#include "quant/rows.h"

namespace kiln {

using quant::IsImageSource;
using quant::Rows;

namespace quant {

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

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

Status CheckCalibrationData(const QuantizeJob& job) {
  if (!job.calibrate.empty() && !job.calibration_tensors.empty())
    return InvalidArgument(
        "calibration data is given twice, as --calibrate files and as in-memory tensors; give "
        "one of them");
  if (job.calibrate.empty() && job.calibration_tensors.empty())
    return InvalidArgument(
        "no calibration data: give --calibrate files or in-memory calibration tensors");
  const std::vector<NamedTensor>& tensors = job.calibration_tensors;
  int64_t samples = -1;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, v] = tensors[i];
    if (!v.defined() || IsSequenceType(v.dtype()) || IsOptionalType(v.dtype()) ||
        v.dtype() == DataType::kString)
      return InvalidArgument("calibration input '" + name + "' is a " + DataTypeName(v.dtype()) +
                             "; calibration takes arrays of numbers");
    if (v.shape().empty())
      return InvalidArgument("calibration input '" + name +
                             "' is a scalar; give its samples along the first dimension");
    for (size_t j = 0; j < i; ++j)
      if (tensors[j].name == name)
        return InvalidArgument("calibration input '" + name + "' is given twice");
    if (samples >= 0 && v.shape()[0] != samples)
      return InvalidArgument("calibration inputs hold different numbers of samples: '" +
                             tensors[0].name + "' has " + std::to_string(samples) + ", '" + name +
                             "' has " + std::to_string(v.shape()[0]));
    samples = v.shape()[0];
  }
  if (samples == 0) return InvalidArgument("calibration data holds no samples (first dimension 0)");
  return OkStatus();
}

}  // namespace quant

namespace {

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

// A tensor file's samples, converted to the input's float type if need be.
StatusOr<Tensor> ReadSamplesFile(const std::string& path, const TensorSpec& in) {
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

std::string KeyOfText(std::string text) {
  return CalibrationDataKey(
      Tensor::View(DataType::kUInt8, {static_cast<int64_t>(text.size())}, text.data()),
      static_cast<int64_t>(text.size()));
}

}  // namespace

struct CalibrationSamples::Impl {
  std::unique_ptr<ImageTensorReader> images;
  std::string image_input;
  std::vector<std::string> paths;  // the images calibrated on
  std::vector<NamedTensor> data;   // one tensor file per input
  std::vector<std::string> sources;
  int64_t count = 0;
  std::string key, what;

  Status OpenImages(const QuantizeJob& job, const TensorSpec& in, const std::string& source);
  Status OpenOne(const QuantizeJob& job, const TensorSpec& in, const std::string& source);
  Status OpenNamed(const QuantizeJob& job, const std::vector<TensorSpec>& inputs,
                   const std::vector<std::pair<std::string, std::string>>& sources);
  Status OpenTensors(const QuantizeJob& job, const std::vector<TensorSpec>& inputs);
};

Status CalibrationSamples::Impl::OpenImages(const QuantizeJob& job, const TensorSpec& in,
                                            const std::string& source) {
  image_input = in.name;
  KILN_ASSIGN_OR_RETURN(images, ImageTensorReader::Create(source, job.recipe, in));
  const auto& files = images->files();
  const int64_t total = static_cast<int64_t>(files.size());
  const int64_t n = std::min<int64_t>(job.samples, total);
  std::string text = "recipe " + images->recipe();
  for (int64_t i = 0; i < n; ++i) {  // spread over the list (folders are often by class)
    paths.push_back(files[static_cast<size_t>(i * total / n)]);
    struct stat st {};
    stat(paths.back().c_str(), &st);
    text +=
        "\n" + paths.back() + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtime);
  }
  count = n;
  key = KeyOfText(text);
  what = std::to_string(n) + " of " + std::to_string(total) + " images in '" + source +
         "' (recipe " + images->recipe() + ")";
  return OkStatus();
}

Status CalibrationSamples::Impl::OpenOne(const QuantizeJob& job, const TensorSpec& in,
                                         const std::string& source) {
  if (IsImageSource(source)) return OpenImages(job, in, source);
  KILN_ASSIGN_OR_RETURN(Tensor t, ReadSamplesFile(source, in));
  count = std::min<int64_t>(job.samples, t.shape()[0]);
  key = CalibrationDataKey(t, count);  // as before several inputs were taken
  what = std::to_string(count) + " samples of '" + source + "'";
  data.push_back({in.name, std::move(t)});
  return OkStatus();
}

// One tensor file per input, NAME=FILE each.
Status CalibrationSamples::Impl::OpenNamed(
    const QuantizeJob& job, const std::vector<TensorSpec>& inputs,
    const std::vector<std::pair<std::string, std::string>>& sources) {
  for (const auto& [name, path] : sources)
    if (name.empty())
      return InvalidArgument("--calibrate '" + path +
                             "' names no input of the model; with several sources each is "
                             "NAME=FILE, NAME one of the model's inputs");
  int64_t rows = -1;
  std::string first;
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
    KILN_ASSIGN_OR_RETURN(Tensor t, ReadSamplesFile(path, in));
    if (rows >= 0 && t.shape()[0] != rows)
      return InvalidArgument("--calibrate: '" + path + "' (input '" + in.name + "') holds " +
                             std::to_string(t.shape()[0]) + " samples and '" + first + "' " +
                             std::to_string(rows) + "; every input needs as many");
    if (rows < 0) rows = t.shape()[0], first = path;
    data.push_back({in.name, std::move(t)});
  }
  count = std::min<int64_t>(job.samples, rows);
  std::string text;
  for (const auto& [name, t] : data) text += name + "=" + CalibrationDataKey(t, count) + "\n";
  key = KeyOfText(text);
  what = std::to_string(count) + " samples of " + std::to_string(data.size()) +
         " tensor files (one per input)";
  return OkStatus();
}

// job.calibration_tensors: one per input, used in place (converted when the float type differs).
Status CalibrationSamples::Impl::OpenTensors(const QuantizeJob& job,
                                             const std::vector<TensorSpec>& inputs) {
  std::vector<std::string> names;
  for (const TensorSpec& in : inputs) names.push_back("'" + in.name + "'");
  for (const NamedTensor& given : job.calibration_tensors)
    if (std::none_of(inputs.begin(), inputs.end(),
                     [&](const TensorSpec& in) { return in.name == given.name; }))
      return InvalidArgument("calibration input '" + given.name +
                             "' is not an input of the model; its inputs are " +
                             quant::Joined(names));
  for (const TensorSpec& in : inputs) {
    auto it = std::find_if(job.calibration_tensors.begin(), job.calibration_tensors.end(),
                           [&](const NamedTensor& t) { return t.name == in.name; });
    if (it == job.calibration_tensors.end())
      return InvalidArgument("calibration tensors: input '" + in.name +
                             "' is missing; every input of the model (" + quant::Joined(names) +
                             ") needs its samples");
    Tensor t = it->tensor;
    if (t.dtype() != in.dtype) {
      StatusOr<Tensor> converted = ConvertFloatTensor(t, in.dtype);
      if (!converted.ok())
        return Status(converted.status().code(),
                      "calibration input '" + in.name + "' is " + DataTypeName(t.dtype()) +
                          " and the model's input " + DataTypeName(in.dtype) + ": " +
                          converted.status().message());
      t = std::move(converted).value();
    }
    sources.push_back("tensor '" + in.name + "'");
    data.push_back({in.name, std::move(t)});
  }
  count = std::min<int64_t>(job.samples, data[0].tensor.shape()[0]);
  if (data.size() == 1) {  // the key of one tensor file (OpenOne), else of one per input
    key = CalibrationDataKey(data[0].tensor, count);
    what = std::to_string(count) + " samples of tensor '" + data[0].name + "'";
    return OkStatus();
  }
  std::string text;
  for (const auto& [name, t] : data) text += name + "=" + CalibrationDataKey(t, count) + "\n";
  key = KeyOfText(text);
  what = std::to_string(count) + " samples of " + std::to_string(data.size()) +
         " tensors (one per input)";
  return OkStatus();
}

CalibrationSamples::CalibrationSamples() : impl_(std::make_unique<Impl>()) {}
CalibrationSamples::~CalibrationSamples() = default;

StatusOr<std::unique_ptr<CalibrationSamples>> CalibrationSamples::Open(
    const QuantizeJob& job, const std::vector<TensorSpec>& inputs) {
  std::unique_ptr<CalibrationSamples> s(new CalibrationSamples());
  KILN_RETURN_IF_ERROR(quant::CheckCalibrationData(job));
  if (job.calibrate.empty()) {
    KILN_RETURN_IF_ERROR(s->impl_->OpenTensors(job, inputs));
    return s;
  }
  s->impl_->sources = job.calibrate;
  const auto sources = CalibrationSources(job.calibrate, inputs);
  const bool named = std::any_of(sources.begin(), sources.end(),
                                 [](const auto& src) { return !src.first.empty(); });
  if (named) {
    KILN_RETURN_IF_ERROR(s->impl_->OpenNamed(job, inputs, sources));
    return s;
  }
  if (sources.size() != 1)
    return InvalidArgument(
        "--calibrate is given " + std::to_string(sources.size()) +
        " times: a model with several inputs takes one tensor file per input as NAME=FILE");
  if (inputs.size() != 1) {
    std::string names;
    for (const auto& t : inputs) names += (names.empty() ? "" : ", ") + t.name;
    return Unsupported("calibration from one tensor file needs a one-input model; '" + job.model +
                       "' has " + std::to_string(inputs.size()) + " inputs (" + names +
                       "): give each as --calibrate NAME=FILE");
  }
  KILN_RETURN_IF_ERROR(s->impl_->OpenOne(job, inputs[0], sources[0].second));
  return s;
}

int64_t CalibrationSamples::count() const { return impl_->count; }
const Tensor* CalibrationSamples::single() const {
  return impl_->data.size() == 1 ? &impl_->data[0].tensor : nullptr;
}
const std::string& CalibrationSamples::key() const { return impl_->key; }
const std::string& CalibrationSamples::what() const { return impl_->what; }
const std::vector<std::string>& CalibrationSamples::sources() const { return impl_->sources; }

StatusOr<std::vector<NamedTensor>> CalibrationSamples::HeldOut(int64_t k, bool* held_out) {
  Impl& m = *impl_;
  if (!m.images) {
    const int64_t rows = m.data[0].tensor.shape()[0];
    *held_out = rows > m.count;
    std::vector<NamedTensor> out;
    for (const auto& [name, t] : m.data)
      out.push_back({name, *held_out ? Rows(t, m.count, std::min(rows, m.count + k))
                                     : Rows(t, 0, std::min(m.count, k))});
    return out;
  }
  const auto& files = m.images->files();
  std::vector<std::string> pick;
  for (size_t i = 0; i < files.size() && static_cast<int64_t>(pick.size()) < k; ++i)
    if (std::find(m.paths.begin(), m.paths.end(), files[i]) == m.paths.end())
      pick.push_back(files[i]);
  *held_out = !pick.empty();
  if (pick.empty()) pick.assign(m.paths.begin(), m.paths.begin() + std::min<int64_t>(k, m.count));
  KILN_ASSIGN_OR_RETURN(Tensor t, m.images->Read(pick, nullptr));
  return std::vector<NamedTensor>{{m.image_input, std::move(t)}};
}

StatusOr<std::vector<NamedTensor>> CalibrationSamples::Batch(int64_t b, int64_t e,
                                                             std::vector<std::string>* failures) {
  Impl& m = *impl_;
  std::vector<NamedTensor> out;
  if (!m.images) {
    for (const auto& [name, t] : m.data) out.push_back({name, Rows(t, b, e)});
    return out;
  }
  KILN_ASSIGN_OR_RETURN(Tensor t,
                        m.images->Read({m.paths.begin() + b, m.paths.begin() + e}, failures));
  out.push_back({m.image_input, std::move(t)});
  return out;
}

Status Calibrate(CalibrationSamples* samples, Quantizer* q, int64_t batch,
                 std::vector<std::string>* failures, const QuantizeProgress& progress) {
  const int64_t n = samples->count();
  const std::string passes = std::to_string(q->passes());
  for (int pass = 0; pass < q->passes(); ++pass) {
    const std::string what = "calibration pass " + std::to_string(pass + 1) + "/" + passes + ": ";
    KILN_RETURN_IF_ERROR(q->BeginPass(pass));
    for (int64_t b = 0; b < n; b += batch) {
      if (progress.cancelled && progress.cancelled())
        return Status(StatusCode::kCancelled, "calibration cancelled at sample " +
                                                  std::to_string(b) + " of pass " +
                                                  std::to_string(pass + 1) + "/" + passes);
      const int64_t e = std::min(n, b + batch);
      KILN_ASSIGN_OR_RETURN(auto rows, samples->Batch(b, e, pass == 0 ? failures : nullptr));
      if (rows[0].tensor.shape()[0] == 0) continue;  // every image of this batch failed
      Status s = q->Observe(rows);
      if (!s.ok())
        return Status(s.code(), s.message() + "\n  while calibrating on samples " +
                                    std::to_string(b) + ".." + std::to_string(e - 1) + " of " +
                                    quant::Joined(samples->sources()));
      if (progress.batch)
        progress.batch(what + std::to_string(e) + "/" + std::to_string(n) + " samples");
    }
    if (progress.note) progress.note(what + std::to_string(n) + " samples");
  }
  return OkStatus();
}

}  // namespace kiln
