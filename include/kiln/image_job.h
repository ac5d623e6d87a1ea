// ImageJob: the offline batch job over image files that `kiln run --images` runs, as a library
// API. It lists the images (a directory, recursively, or a list file), keeps this shard's share,
// skips those already recorded (resume), decodes and preprocesses them on worker threads
// (prefetch), runs the model batch by batch and appends one record per image (JSON Lines or CSV;
// top-k classes for a classifier, raw outputs as .npy files otherwise), flushed after every
// batch, so a killed job loses at most the batch in flight. docs/image-jobs.md has the formats.
//
// Create() checks everything that can be wrong (shard, record format, listing, labels, the
// model's input and output, recipe, output folder) before any image is decoded. Ownership: the
// job borrows the Session, which must outlive it. Thread-safety: one thread drives a job; the
// progress callback runs on that thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/session.h"
#include "kiln/status.h"

namespace kiln {

struct ImageJobOptions {
  std::string images;   // a directory or a list file (one path per line)
  std::string recipe;   // a preset name or a recipe .json file; "" picks one from the input
  std::string labels;   // class names, one per line; "" for none
  std::string out;      // FILE.jsonl or FILE.csv
  std::string shard;    // "I/N", "auto" (JOB_COMPLETION_INDEX), or "" for the whole list
  int shards = 0;       // N for "auto"
  int batch = 32;       // images per model run (a fixed batch dim in the model wins)
  int workers = 0;      // decode threads; 0: one per CPU the process may use (affinity, quota)
  int top_k = 5;        // classes per record (classifiers)
  bool resume = false;  // skip images already recorded in `out`
};

// What the job will do, known after Create().
struct ImageJobPlan {
  int64_t found = 0;    // images listed
  int64_t items = 0;    // in this shard
  int64_t skipped = 0;  // already recorded (resume)
  int64_t todo = 0;
  int batch = 0;
  int workers = 0;
  std::string recipe;
  std::string shard;  // "" or "shard I/N from ORIGIN"
  bool classifier = false;
  std::string raw_output_dir;  // for non-classifiers: where the .npy files go
};

struct ImageJobProgress {
  int64_t done = 0, total = 0, failed = 0;
  double elapsed_s = 0;  // since the first batch was requested
};

// Seconds and counts of a finished job. The first batch includes the plan's preparation (shapes,
// kernels, weight packing) and the pipeline's start; steady_images_per_s excludes it.
struct ImageJobSummary {
  int64_t done = 0, ok = 0, failed = 0, skipped = 0;
  double work_s = 0;         // from the first batch requested to the last record flushed
  double first_batch_s = 0;  // the first batch, plan preparation included
  int64_t first_batch_images = 0;
  double images_per_s = 0;         // done / work_s
  double steady_images_per_s = 0;  // after the first batch (0 when there was only one)
  // Decoding summed over the workers (busy seconds), and the driving thread's own time.
  double read_s = 0, decode_s = 0, transform_s = 0;
  double compute_s = 0, wait_s = 0, write_s = 0;
  int workers = 0;
  std::string records;  // the records file
};

class ImageJob {
 public:
  static StatusOr<std::unique_ptr<ImageJob>> Create(const Session& session,
                                                    const ImageJobOptions& options);
  ~ImageJob();
  ImageJob(const ImageJob&) = delete;
  ImageJob& operator=(const ImageJob&) = delete;

  const ImageJobPlan& plan() const;
  // Runs the job to its end. `progress`, if given, is called after every batch. A model error
  // stops the job (records written so far stay); an image that fails to read or decode gets an
  // error record and the job goes on. Run once.
  StatusOr<ImageJobSummary> Run(const std::function<void(const ImageJobProgress&)>& progress = {});

 private:
  struct Impl;
  explicit ImageJob(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Image files decoded and preprocessed for one model input outside a job, one batch at a time
// (kiln quantize's calibration data): the same sources and recipes as ImageJob. Not thread-safe.
class ImageTensorReader {
 public:
  // `images`: a directory or list file (as ImageJobOptions::images); `recipe` as
  // ImageJobOptions::recipe, resolved against `input` (a fixed-size image input [N,C,H,W]).
  // Fails before decoding anything: no image found, an unknown recipe, a recipe whose images do
  // not fit the input.
  static StatusOr<std::unique_ptr<ImageTensorReader>> Create(const std::string& images,
                                                             const std::string& recipe,
                                                             const TensorSpec& input);
  ~ImageTensorReader();
  // The images listed, sorted.
  const std::vector<std::string>& files() const;
  const std::string& recipe() const;
  // A float32 tensor [k, C, H, W] of the `paths` that decoded (k <= paths.size()); each that did
  // not is appended to `failures` as "path: reason" and left out.
  StatusOr<Tensor> Read(const std::vector<std::string>& paths, std::vector<std::string>* failures);

 private:
  struct Impl;
  explicit ImageTensorReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Encoded images the caller already holds in memory (bytes it read itself: Ray Data's
// read_binary_files, an object store), or pixels decoded elsewhere, preprocessed for one model
// input with ImageJob's decoders and recipes, a batch at a time, on `threads` threads (one
// decoder each; the calling thread is one of them). The Python package's kiln.ImageDecoder and
// kiln.ray run on it. Thread-safety: one thread calls Decode/Transform at a time.
class ImageBatchDecoder {
 public:
  // `recipe` as ImageJobOptions::recipe, resolved against `input` (a fixed-size image input
  // [N,C,H,W]); threads < 1 is 1. Fails on an unknown recipe or one whose images do not fit.
  static StatusOr<std::unique_ptr<ImageBatchDecoder>> Create(const std::string& recipe,
                                                             const TensorSpec& input,
                                                             int threads = 1);
  ~ImageBatchDecoder();
  ImageBatchDecoder(const ImageBatchDecoder&) = delete;
  ImageBatchDecoder& operator=(const ImageBatchDecoder&) = delete;

  const std::string& recipe() const;
  // The recipe as JSON (its resolved fields), for records and logs.
  std::string recipe_json() const;
  int threads() const;
  // One image's shape: {C, H, W} (NCHW recipes) or {H, W, C} (NHWC); a batch prepends N.
  std::vector<int64_t> sample_shape() const;
  int64_t sample_elements() const;

  // Decodes and preprocesses images[i] into dst + i * sample_elements() floats; returns one
  // Status per image. A failed image's floats are zeros; a good image never depends on the others.
  std::vector<Status> Decode(const std::vector<std::span<const uint8_t>>& images, float* dst);
  // Pixels decoded elsewhere: 8-bit, interleaved, packed rows; 1 (gray) or 3 (RGB) channels.
  struct Pixels {
    const uint8_t* data = nullptr;
    int width = 0, height = 0, channels = 0;
  };
  std::vector<Status> Transform(const std::vector<Pixels>& images, float* dst);

 private:
  struct Impl;
  explicit ImageBatchDecoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The classification in ImageJob's records, for one row of a classifier's scores: softmax first
// unless the row already is a distribution (every value in [0, 1], sum within 1e-3 of 1), then
// the k (at most `classes`) most probable classes, best first, ties to the lower index.
void TopKClasses(const float* row, int64_t classes, int k, std::vector<int64_t>* top_k,
                 std::vector<float>* scores);

}  // namespace kiln
