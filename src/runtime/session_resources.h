// Memory a session's plans share, so a session serving many input shapes holds one copy of what
// does not depend on the shape.
//
// WeightCache: constant weights repacked into a kernel's layout (oneDNN's blocked convolution
// weights, say), keyed by the source tensor and the backend's description of the packed layout.
// Plans for batch 1 and batch 32 whose kernels chose the same layout share one packed copy.
// ArenaPool: the activation arenas of CPU runs. A run takes an arena of at least its plan's size
// and returns it; a free arena too small for the run is released before a bigger one is made, so
// sequential runs over many shapes hold one arena of the largest size (and N concurrent runs N).
//
// DeviceConstantCache: the model's constants on a device, once per session.
//
// Thread-safe. Owned by the session (shared with its plans); freed with the last of them. The
// WeightCache belongs to the model and is shared by the sessions of one model file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::runtime {

class WeightCache {
 public:
  // The packed form of `source` under `key`, made by `pack` the first time it is asked for. The
  // entry keeps `source`'s storage alive, so its address cannot be reused by another tensor while
  // the entry exists.
  StatusOr<Tensor> GetOrPack(const Tensor& source, const std::string& key,
                             const std::function<StatusOr<Tensor>()>& pack);
  size_t bytes() const;  // packed bytes held
  size_t entries() const;
  uint64_t hits() const;  // requests served without packing

 private:
  struct Entry {
    Tensor source;
    Tensor packed;
  };
  mutable std::mutex mu_;
  std::map<std::pair<const void*, std::string>, Entry> entries_;
  size_t bytes_ = 0;
  uint64_t hits_ = 0;
};

class ArenaPool {
 public:
  // A free arena of at least `bytes` (the smallest such), else a new one; free arenas smaller
  // than `bytes` are released first.
  Tensor Take(size_t bytes);
  void Return(Tensor arena);
  size_t bytes() const;  // arenas alive: in use plus free
  size_t count() const;

 private:
  mutable std::mutex mu_;
  std::vector<Tensor> free_;
  size_t live_bytes_ = 0;
  size_t live_count_ = 0;
};

// The model's constants on a device backend, uploaded by the first plan that reads them and
// viewed by every later plan (a server planning batch sizes 1..32 holds the weights once on the
// GPU). Keyed by the host tensor's storage, which an entry keeps alive.
class DeviceConstantCache {
 public:
  struct Hit {
    Tensor view;                   // the device copy, with the constant's dtype and shape
    std::shared_ptr<void> memory;  // the allocation it lies in (keeps it alive)
  };
  std::optional<Hit> Find(const Tensor& host) const;
  void Add(const Tensor& host, Tensor view, std::shared_ptr<void> memory);
  size_t bytes() const;  // device bytes of the constants held
  size_t entries() const;

 private:
  struct Entry {
    Tensor host;
    Hit hit;
  };
  mutable std::mutex mu_;
  std::map<const void*, Entry> entries_;
  size_t bytes_ = 0;
};

struct SessionResources {
  // Shared with every session of the same model (runtime/model_store.h); its own otherwise.
  std::shared_ptr<WeightCache> weights = std::make_shared<WeightCache>();
  ArenaPool arenas;
  DeviceConstantCache device_constants;
};

}  // namespace kiln::runtime
