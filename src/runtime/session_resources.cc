#include "runtime/session_resources.h"

#include <algorithm>

namespace kiln::runtime {

StatusOr<Tensor> WeightCache::GetOrPack(const Tensor& source, const std::string& key,
                                        const std::function<StatusOr<Tensor>()>& pack) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto id = std::make_pair(static_cast<const void*>(source.raw()), key);
  auto it = entries_.find(id);
  if (it != entries_.end()) {
    ++hits_;
    return it->second.packed;
  }
  StatusOr<Tensor> packed = pack();
  if (!packed.ok()) return packed.status();
  bytes_ += packed->bytes();
  entries_.emplace(id, Entry{source, *packed});
  return packed;
}

size_t WeightCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}
size_t WeightCache::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}
uint64_t WeightCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

Tensor ArenaPool::Take(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  std::vector<Tensor> released;  // freed outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->bytes() >= bytes && (best == free_.end() || it->bytes() < best->bytes())) best = it;
    if (best != free_.end()) {
      Tensor t = std::move(*best);
      free_.erase(best);
      return t;
    }
    for (Tensor& t : free_) {
      live_bytes_ -= t.bytes();
      --live_count_;
      released.push_back(std::move(t));
    }
    free_.clear();
  }
  released.clear();
  Tensor t = Tensor::Empty(DataType::kUInt8, {static_cast<int64_t>(bytes)});
  std::lock_guard<std::mutex> lock(mu_);
  live_bytes_ += t.bytes();
  ++live_count_;
  return t;
}

void ArenaPool::Return(Tensor arena) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(std::move(arena));
}

size_t ArenaPool::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_bytes_;
}
size_t ArenaPool::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_count_;
}

std::optional<DeviceConstantCache::Hit> DeviceConstantCache::Find(const Tensor& host) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(host.raw());
  if (it == entries_.end() || it->second.host.dtype() != host.dtype() ||
      it->second.host.shape() != host.shape())
    return std::nullopt;
  return it->second.hit;
}

void DeviceConstantCache::Add(const Tensor& host, Tensor view, std::shared_ptr<void> memory) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = entries_[host.raw()];
  if (e.hit.memory) return;  // another plan added it first
  bytes_ += view.bytes();
  e.host = host;
  e.hit = {std::move(view), std::move(memory)};
}

size_t DeviceConstantCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t DeviceConstantCache::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace kiln::runtime
