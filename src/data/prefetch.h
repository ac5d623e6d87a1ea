// The data pipeline's batch stage: persistent decode workers fill a fixed pool of staging buffers
// with preprocessed images, batch after batch, ahead of the consumer (the model).
//
// - The pool holds `depth` buffers of batch x sample floats, allocated once at Create() by
//   Options::allocate (64-byte aligned ordinary memory by default; the image job passes
//   Session::AllocateHostBuffer, page-locked memory on the CUDA backend, so batches are copied to
//   the device straight from where the workers wrote them); nothing is allocated per batch.
// - `workers` threads, each with its own Preprocessor (decoder and transformer scratch), take the
//   next image in order and write it straight into its slot of its batch's buffer. Up to `depth`
//   batches are being filled or waiting while the consumer works on one, so decoding runs ahead of
//   compute and a slow image only delays its own batch.
// - A failed image (unreadable, corrupt, not an image, too many pixels) is recorded with its Status
//   and its slot is dropped: the good images of a batch are compacted to the front of the buffer,
//   so the model sees `good.size()` images and nothing else.
// - Next() hands batches out in order; the consumer returns each with Release() before the buffer
//   can be reused.
//
// Thread-safety: Next() and Release() are called from one consumer thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/recipe.h"
#include "kiln/status.h"

namespace kiln::data {

struct Batch {
  int64_t number = 0;         // 0, 1, 2, ... in item order
  float* data = nullptr;      // good.size() samples of sample_elements floats, packed
  std::vector<int64_t> good;  // item indices of the images in `data`, in order
  struct Failure {
    int64_t item;
    Status status;
  };
  std::vector<Failure> failed;  // item indices and errors of the images that failed
};

struct PrefetchStats {
  PreprocessStats preprocess;  // summed over workers (busy seconds, not wall)
  double wait_s = 0;           // consumer time blocked in Next()
};

class Prefetcher {
 public:
  struct Options {
    int batch = 1;
    int workers = 1;
    int depth = 3;  // staging buffers
    // Allocates one staging buffer (at least `bytes`, 64-byte aligned); null: aligned_alloc.
    std::function<StatusOr<std::shared_ptr<void>>(size_t bytes)> allocate;
  };
  // Validates the recipe and options, allocates the pool, starts the workers.
  static StatusOr<std::unique_ptr<Prefetcher>> Create(const Recipe& recipe,
                                                      std::vector<std::string> paths,
                                                      const Options& options);
  ~Prefetcher();  // stops and joins the workers
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  int64_t sample_elements() const { return sample_; }
  Shape sample_shape() const { return sample_shape_; }
  const std::vector<std::string>& paths() const { return paths_; }
  int64_t num_batches() const { return num_batches_; }

  // The next batch in order, blocking until it is ready; nullptr when every batch was handed out.
  Batch* Next();
  // Gives the batch's buffer back to the pool.
  void Release(Batch* batch);
  // Valid after the last batch was released (workers have exited) or at any time for wait_s.
  PrefetchStats stats();

 private:
  struct Slot;
  Prefetcher() = default;
  void WorkerLoop(int worker);

  std::vector<std::string> paths_;
  int batch_ = 1;
  int64_t sample_ = 0;
  Shape sample_shape_;
  int64_t num_batches_ = 0;
  std::vector<std::unique_ptr<Preprocessor>> preprocessors_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<std::thread> threads_;

  std::mutex mu_;
  std::condition_variable work_cv_, ready_cv_;
  int64_t next_item_ = 0;     // next image a worker takes
  int64_t next_assign_ = 0;   // next batch to get a buffer
  int64_t next_consume_ = 0;  // next batch Next() returns
  bool stop_ = false;
  double wait_s_ = 0;
};

}  // namespace kiln::data
