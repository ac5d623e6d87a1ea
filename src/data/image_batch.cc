// ImageBatchDecoder and TopKClasses (include/kiln/image_job.h): ImageJob's decoding and its
// records' classification, for callers that hold the image bytes themselves (kiln.ray).
//
// Threads: a call splits its images over `threads` workers (the caller plus threads-1 started for
// the call: a batch of 32 photos decodes in tens of milliseconds, so starting threads costs under
// 0.1 %), each with its own Preprocessor; images are taken one at a time from a shared counter, so
// a large photo does not hold up a worker's share.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <numeric>
#include <thread>

#include "data/recipe.h"
#include "kiln/image_job.h"

namespace kiln {

struct ImageBatchDecoder::Impl {
  data::Recipe recipe;
  std::vector<std::unique_ptr<data::Preprocessor>> workers;
  Shape sample;
  int64_t per = 0;

  // Runs fn(worker, i) for i in [0, n) on up to workers.size() threads.
  template <typename Fn>
  void ForEach(size_t n, Fn fn) {
    const size_t t = std::min(workers.size(), n);
    std::atomic<size_t> next{0};
    auto work = [&](size_t w) {
      for (size_t i; (i = next.fetch_add(1)) < n;) fn(*workers[w], i);
    };
    std::vector<std::thread> extra;
    for (size_t w = 1; w < t; ++w) extra.emplace_back(work, w);
    work(0);
    for (auto& th : extra) th.join();
  }
};

ImageBatchDecoder::ImageBatchDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ImageBatchDecoder::~ImageBatchDecoder() = default;

StatusOr<std::unique_ptr<ImageBatchDecoder>> ImageBatchDecoder::Create(const std::string& recipe,
                                                                       const TensorSpec& input,
                                                                       int threads) {
  if (input.dims.size() != 4)
    return InvalidArgument("images need a [N,C,H,W] model input; got " + input.ToString());
  auto impl = std::make_unique<Impl>();
  KILN_ASSIGN_OR_RETURN(impl->recipe, data::RecipeForInput(recipe, input.dims));
  for (int t = 0; t < std::max(threads, 1); ++t) {
    KILN_ASSIGN_OR_RETURN(auto pre, data::Preprocessor::Create(impl->recipe));
    impl->workers.push_back(std::move(pre));
  }
  impl->sample = impl->workers[0]->OutputShape();
  impl->per = impl->workers[0]->OutputElements();
  for (size_t d = 0; d < 3; ++d)
    if (input.dims[d + 1] > 0 && input.dims[d + 1] != impl->sample[d])
      return InvalidArgument("recipe '" + impl->recipe.name + "' makes images of " +
                             ShapeToString(impl->sample) + " but input is " + input.ToString());
  return std::unique_ptr<ImageBatchDecoder>(new ImageBatchDecoder(std::move(impl)));
}

const std::string& ImageBatchDecoder::recipe() const { return impl_->recipe.name; }
std::string ImageBatchDecoder::recipe_json() const { return data::RecipeToJson(impl_->recipe); }
int ImageBatchDecoder::threads() const { return static_cast<int>(impl_->workers.size()); }
std::vector<int64_t> ImageBatchDecoder::sample_shape() const { return impl_->sample; }
int64_t ImageBatchDecoder::sample_elements() const { return impl_->per; }

std::vector<Status> ImageBatchDecoder::Decode(const std::vector<std::span<const uint8_t>>& images,
                                              float* dst) {
  std::vector<Status> out(images.size());
  const int64_t per = impl_->per;
  impl_->ForEach(images.size(), [&](data::Preprocessor& pre, size_t i) {
    float* row = dst + static_cast<int64_t>(i) * per;
    out[i] = pre.Run(images[i], row);
    if (!out[i].ok()) std::memset(row, 0, sizeof(float) * static_cast<size_t>(per));
  });
  return out;
}

std::vector<Status> ImageBatchDecoder::Transform(const std::vector<Pixels>& images, float* dst) {
  std::vector<Status> out(images.size());
  const int64_t per = impl_->per;
  impl_->ForEach(images.size(), [&](data::Preprocessor& pre, size_t i) {
    float* row = dst + static_cast<int64_t>(i) * per;
    const Pixels& p = images[i];
    if (p.data == nullptr || p.width <= 0 || p.height <= 0 ||
        (p.channels != 1 && p.channels != 3)) {
      out[i] = InvalidArgument(
          "pixels must be 8-bit [height, width] or [height, width, 3] with "
          "height, width >= 1; got " +
          std::to_string(p.height) + "x" + std::to_string(p.width) + "x" +
          std::to_string(p.channels));
    } else {
      data::Image image;
      image.Reset(p.width, p.height, p.channels);
      std::memcpy(image.pixels.data(), p.data, image.pixels.size());
      out[i] = pre.RunDecoded(image, row);
    }
    if (!out[i].ok()) std::memset(row, 0, sizeof(float) * static_cast<size_t>(per));
  });
  return out;
}

void TopKClasses(const float* row, int64_t classes, int k, std::vector<int64_t>* top_k,
                 std::vector<float>* scores) {
  top_k->clear();
  scores->clear();
  if (classes <= 0 || k <= 0) return;
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
  top_k->assign(idx.begin(), idx.begin() + k);
  for (int i = 0; i < k; ++i) scores->push_back(p[idx[i]]);
}

}  // namespace kiln
