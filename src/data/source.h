// The data pipeline's first stage: which image files a job reads, in a deterministic order, and
// which of them this shard of a job takes.
//
// A source is a directory (walked recursively; regular files, or links to them, whose extension is
// .jpg, .jpeg or .png in any case; sorted by path, byte order) or a list file (one path per line;
// relative paths are relative to the list's folder; blank lines and lines starting with '#' are
// skipped; order kept). Item paths are the directory joined with the relative path, or the list
// line resolved against the list's folder, so the same command always names an image the same way
// (job records and --resume rely on that).
//
// Sharding: shard I of N keeps the items whose index (in the full sorted list) % N == I, so N
// shards cover every item exactly once. "auto" takes I and N from the scheduler: Kubernetes
// Indexed Jobs (JOB_COMPLETION_INDEX, with N given as --shards) or Slurm job arrays
// (SLURM_ARRAY_TASK_ID minus SLURM_ARRAY_TASK_MIN when set, of SLURM_ARRAY_TASK_COUNT).
//
// Thread-safety: plain functions on values.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln::data {

// True for .jpg / .jpeg / .png, case-insensitive.
bool HasImageExtension(const std::string& path);

// Lists a directory or list file as described above. NotFound when `source` does not exist;
// InvalidArgument when it is neither a directory nor a regular file, a walk fails (permissions), or
// no image is found.
StatusOr<std::vector<std::string>> ListImages(const std::string& source);

struct ShardSpec {
  int index = 0;
  int count = 1;
  std::string origin;  // how it was chosen, for logs: "--shard 1/4", "JOB_COMPLETION_INDEX=1"
};

// Parses --shard ("" = no sharding, "I/N", or "auto") with --shards (0 = not given). `getenv`
// reads the environment (tests pass their own). InvalidArgument with the spec on any error.
StatusOr<ShardSpec> ParseShard(const std::string& spec, int shards,
                               const std::function<const char*(const char*)>& getenv);

// The items of shard `s`: index % s.count == s.index, order kept.
std::vector<std::string> ApplyShard(const std::vector<std::string>& items, const ShardSpec& s);

}  // namespace kiln::data
