// Decode workers, the staging-buffer pool and the prefetch queue (see prefetch.h).
#include "data/prefetch.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

namespace kiln::data {

struct Prefetcher::Slot {
  enum class State { kFree, kFilling, kReady, kInUse };
  State state = State::kFree;
  std::shared_ptr<void> memory;  // owns `buffer`
  float* buffer = nullptr;       // batch x sample floats, 64-byte aligned
  int pending = 0;               // images of this batch not yet finished
  std::vector<Status> results;   // per position in the batch
  Batch batch;
};

StatusOr<std::unique_ptr<Prefetcher>> Prefetcher::Create(const Recipe& recipe,
                                                         std::vector<std::string> paths,
                                                         const Options& options) {
  if (options.batch < 1 || options.workers < 1 || options.depth < 1)
    return InvalidArgument("prefetch: batch, workers and depth must be >= 1; got " +
                           std::to_string(options.batch) + ", " + std::to_string(options.workers) +
                           ", " + std::to_string(options.depth));
  std::unique_ptr<Prefetcher> p(new Prefetcher());
  for (int w = 0; w < options.workers; ++w) {
    KILN_ASSIGN_OR_RETURN(auto pre, Preprocessor::Create(recipe));
    p->preprocessors_.push_back(std::move(pre));
  }
  p->paths_ = std::move(paths);
  p->batch_ = options.batch;
  p->sample_ = p->preprocessors_[0]->OutputElements();
  p->sample_shape_ = p->preprocessors_[0]->OutputShape();
  const int64_t n = static_cast<int64_t>(p->paths_.size());
  p->num_batches_ = (n + options.batch - 1) / options.batch;
  const size_t bytes = static_cast<size_t>(p->sample_) * options.batch * sizeof(float);
  for (int d = 0; d < options.depth; ++d) {
    auto slot = std::make_unique<Slot>();
    if (options.allocate) {
      auto mem = options.allocate(bytes);
      if (!mem.ok())
        return Status(mem.status())
            .AddContext("while allocating a staging buffer of " + std::to_string(bytes) + " bytes");
      slot->memory = std::move(mem).value();
    } else {
      slot->memory.reset(std::aligned_alloc(64, (bytes + 63) / 64 * 64), std::free);
    }
    slot->buffer = static_cast<float*>(slot->memory.get());
    if (slot->buffer == nullptr)
      return Status(StatusCode::kOutOfMemory,
                    "cannot allocate a staging buffer of " + std::to_string(bytes) + " bytes");
    slot->results.resize(options.batch);
    slot->batch.good.reserve(options.batch);
    slot->batch.failed.reserve(options.batch);
    p->slots_.push_back(std::move(slot));
  }
  for (int w = 0; w < options.workers; ++w)
    p->threads_.emplace_back([raw = p.get(), w] { raw->WorkerLoop(w); });
  return p;
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void Prefetcher::WorkerLoop(int worker) {
  Preprocessor& pre = *preprocessors_[worker];
  const int64_t n = static_cast<int64_t>(paths_.size());
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    // Wait for an image whose batch has (or can get) a buffer.
    Slot* slot = nullptr;
    for (;;) {
      if (stop_ || next_item_ >= n) return;
      const int64_t b = next_item_ / batch_;
      if (b < next_assign_) {
        slot = slots_[b % slots_.size()].get();
        break;
      }
      Slot* s = slots_[b % slots_.size()].get();
      if (s->state == Slot::State::kFree) {
        s->state = Slot::State::kFilling;
        s->pending = static_cast<int>(std::min<int64_t>(batch_, n - b * batch_));
        s->batch.number = b;
        ++next_assign_;
        slot = s;
        break;
      }
      work_cv_.wait(lock);
    }
    const int64_t item = next_item_++;
    const int pos = static_cast<int>(item % batch_);
    lock.unlock();
    Status st = pre.RunFile(paths_[item], slot->buffer + pos * sample_);
    lock.lock();
    slot->results[pos] = std::move(st);
    if (--slot->pending > 0) continue;
    // Last image of the batch: compact the good samples to the front, then publish.
    Batch& batch = slot->batch;
    batch.good.clear();
    batch.failed.clear();
    const int64_t first = batch.number * batch_;
    const int count = static_cast<int>(std::min<int64_t>(batch_, n - first));
    for (int i = 0; i < count; ++i) {
      if (!slot->results[i].ok()) {
        batch.failed.push_back({first + i, std::move(slot->results[i])});
        continue;
      }
      const int to = static_cast<int>(batch.good.size());
      if (to != i)
        std::memmove(slot->buffer + to * sample_, slot->buffer + i * sample_,
                     static_cast<size_t>(sample_) * sizeof(float));
      batch.good.push_back(first + i);
    }
    for (int i = 0; i < count; ++i) slot->results[i] = OkStatus();
    batch.data = slot->buffer;
    slot->state = Slot::State::kReady;
    ready_cv_.notify_all();
  }
}

Batch* Prefetcher::Next() {
  std::unique_lock<std::mutex> lock(mu_);
  if (next_consume_ >= num_batches_) return nullptr;
  Slot* s = slots_[next_consume_ % slots_.size()].get();
  auto t0 = std::chrono::steady_clock::now();
  ready_cv_.wait(
      lock, [&] { return s->state == Slot::State::kReady && s->batch.number == next_consume_; });
  wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s->state = Slot::State::kInUse;
  ++next_consume_;
  return &s->batch;
}

void Prefetcher::Release(Batch* batch) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slot* s = slots_[batch->number % slots_.size()].get();
    s->state = Slot::State::kFree;
  }
  work_cv_.notify_all();
}

PrefetchStats Prefetcher::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  PrefetchStats out;
  out.wait_s = wait_s_;
  for (const auto& pre : preprocessors_) {
    const PreprocessStats& s = pre->stats();
    out.preprocess.images_ok += s.images_ok;
    out.preprocess.images_failed += s.images_failed;
    out.preprocess.read_s += s.read_s;
    out.preprocess.decode_s += s.decode_s;
    out.preprocess.transform_s += s.transform_s;
  }
  return out;
}

}  // namespace kiln::data
