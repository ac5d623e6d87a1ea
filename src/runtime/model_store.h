// One copy of a model's weights per process: sessions that load the same model file (same bytes,
// same graph-changing options) share its optimized graph with its constants and the packed
// copies kernels make of them (WeightCache), and the memory goes back with the last of them.
//
// Keyed by the SHA-256 of the model bytes and the options that change the optimized graph
// (optimize, disabled passes, precision, backend); options that change only planning (threads,
// tuning, reference kernels, plan bound) do not split the key. A model with external data also
// records each data file's identity (device, inode, size, modification time) relative to its
// folder: a later load shares only when the files it would read are those same files.
//
// The store holds weak references: it never keeps a model alive. When the last session (and
// plan) of a model goes, its memory is freed and glibc's heap is trimmed (malloc_trim), so the
// pages return to the system rather than staying in the allocator's free lists.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/options.h"
#include "kiln/status.h"
#include "runtime/execution_plan.h"
#include "runtime/session_resources.h"

namespace kiln::runtime {

// What sessions of one model share. Immutable once made, except the WeightCache (thread-safe).
struct SharedModel {
  Model model;
  WeightCache weights;
  std::vector<std::string> optimization_log;  // what the passes did (Session::optimization_log)
};

struct FileIdentity {
  std::string location;  // relative to the model's folder
  uint64_t device = 0, inode = 0, size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};

// The identity of `location` in `model_dir`; NotFound when it cannot be read.
StatusOr<FileIdentity> IdentifyFile(const std::string& model_dir, const std::string& location);

// SHA-256 of bytes, or of a file read in pieces (no whole-file copy), as 64 hex digits.
std::string Sha256Hex(std::string_view bytes);
StatusOr<std::string> Sha256HexOfFile(const std::string& path);

// The store key for model bytes with this digest under these options.
std::string ModelStoreKey(const std::string& sha256, const SessionOptions& options);

class ModelStore {
 public:
  static ModelStore& Global();

  // The live model stored under `key` whose external files, resolved in `model_dir`, are the
  // ones it was loaded from; else null.
  std::shared_ptr<SharedModel> Find(const std::string& key, const std::string& model_dir);
  // Stores `made` (loaded from `model_dir`, reading `files`) under `key` and returns it; when
  // another thread stored a live, matching model meanwhile, returns that one instead (and `made`
  // is dropped).
  std::shared_ptr<SharedModel> Add(const std::string& key, const std::string& model_dir,
                                   std::vector<FileIdentity> files,
                                   std::shared_ptr<SharedModel> made);
  size_t live_models();  // stored models that some session still uses

 private:
  struct Entry {
    std::weak_ptr<SharedModel> model;
    std::vector<FileIdentity> files;
  };
  bool Matches(const Entry& e, const std::string& model_dir) const;
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

// Returns the allocator's free memory to the system (glibc: malloc_trim, every arena).
void ReleaseFreeMemory();

// A SharedModel owned by a shared_ptr that trims the heap after freeing it.
std::shared_ptr<SharedModel> MakeSharedModel(Model model, std::vector<std::string> log);

}  // namespace kiln::runtime
