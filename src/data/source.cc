// Image sources: directory walk, list files and sharding (see source.h).
#include "data/source.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>

namespace kiln::data {
namespace fs = std::filesystem;

bool HasImageExtension(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

namespace {

StatusOr<std::vector<std::string>> WalkDirectory(const std::string& dir) {
  std::vector<std::string> rel;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    if (!it->is_regular_file(ec2) || !HasImageExtension(it->path().string())) continue;
    rel.push_back(it->path().lexically_relative(dir).generic_string());
  }
  if (ec) return InvalidArgument("cannot walk image directory '" + dir + "': " + ec.message());
  std::sort(rel.begin(), rel.end());
  std::vector<std::string> items;
  items.reserve(rel.size());
  for (const std::string& r : rel) items.push_back((fs::path(dir) / r).generic_string());
  return items;
}

StatusOr<std::vector<std::string>> ReadList(const std::string& list) {
  std::ifstream in(list);
  if (!in) return NotFound("cannot read image list '" + list + "'");
  const fs::path base = fs::path(list).parent_path();
  std::vector<std::string> items;
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    fs::path p(line);
    items.push_back(p.is_absolute() || base.empty() ? p.generic_string()
                                                    : (base / p).generic_string());
  }
  return items;
}

bool ParseInt(const std::string& s, int* out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

}  // namespace

StatusOr<std::vector<std::string>> ListImages(const std::string& source) {
  std::error_code ec;
  const fs::file_status st = fs::status(source, ec);
  if (ec || !fs::exists(st))
    return NotFound("image directory or list '" + source + "' does not exist");
  std::vector<std::string> items;
  if (fs::is_directory(st)) {
    KILN_ASSIGN_OR_RETURN(items, WalkDirectory(source));
    if (items.empty())
      return InvalidArgument("no .jpg, .jpeg or .png files found under '" + source + "'");
  } else if (fs::is_regular_file(st)) {
    KILN_ASSIGN_OR_RETURN(items, ReadList(source));
    if (items.empty()) return InvalidArgument("image list '" + source + "' names no files");
  } else {
    return InvalidArgument("'" + source + "' is neither a directory nor a list file");
  }
  return items;
}

StatusOr<ShardSpec> ParseShard(const std::string& spec, int shards,
                               const std::function<const char*(const char*)>& getenv) {
  ShardSpec s;
  if (spec.empty()) {
    if (shards != 0) return InvalidArgument("--shards needs --shard auto");
    return s;
  }
  if (spec == "auto") {
    auto env = [&](const char* name) -> std::string {
      const char* v = getenv(name);
      return v ? v : "";
    };
    if (shards < 0)
      return InvalidArgument("--shards must be positive; got " + std::to_string(shards));
    const std::string k8s = env("JOB_COMPLETION_INDEX"), slurm = env("SLURM_ARRAY_TASK_ID");
    if (!k8s.empty()) {
      if (shards == 0)
        return InvalidArgument(
            "--shard auto: JOB_COMPLETION_INDEX is set (Kubernetes Indexed Job), so give the "
            "job's completions as --shards N");
      if (!ParseInt(k8s, &s.index))
        return InvalidArgument("--shard auto: JOB_COMPLETION_INDEX is not an integer; got '" + k8s +
                               "'");
      s.count = shards;
      s.origin = "JOB_COMPLETION_INDEX=" + k8s + " of --shards " + std::to_string(shards);
    } else if (!slurm.empty()) {
      int id = 0, min = 0, count = shards;
      const std::string min_s = env("SLURM_ARRAY_TASK_MIN"),
                        count_s = env("SLURM_ARRAY_TASK_COUNT");
      if (!ParseInt(slurm, &id))
        return InvalidArgument("--shard auto: SLURM_ARRAY_TASK_ID is not an integer; got '" +
                               slurm + "'");
      if (!min_s.empty() && !ParseInt(min_s, &min))
        return InvalidArgument("--shard auto: SLURM_ARRAY_TASK_MIN is not an integer; got '" +
                               min_s + "'");
      if (count == 0 && !ParseInt(count_s, &count))
        return InvalidArgument(
            "--shard auto: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is missing or "
            "not an integer ('" +
            count_s + "'); give --shards N");
      s.index = id - min;
      s.count = count;
      s.origin = "SLURM_ARRAY_TASK_ID=" + slurm + " of " + std::to_string(count);
    } else {
      return InvalidArgument(
          "--shard auto: neither JOB_COMPLETION_INDEX (Kubernetes Indexed Job, with --shards N) "
          "nor SLURM_ARRAY_TASK_ID / SLURM_ARRAY_TASK_COUNT (Slurm job array) is set");
    }
  } else {
    if (shards != 0) return InvalidArgument("--shards goes with --shard auto, not --shard " + spec);
    const size_t slash = spec.find('/');
    if (slash == std::string::npos || !ParseInt(spec.substr(0, slash), &s.index) ||
        !ParseInt(spec.substr(slash + 1), &s.count))
      return InvalidArgument("--shard: expected I/N (e.g. 0/4) or auto; got '" + spec + "'");
    s.origin = "--shard " + spec;
  }
  if (s.count < 1 || s.index < 0 || s.index >= s.count)
    return InvalidArgument("shard index must be in [0, N) with N >= 1; got " +
                           std::to_string(s.index) + "/" + std::to_string(s.count) + " (" +
                           s.origin + ")");
  return s;
}

std::vector<std::string> ApplyShard(const std::vector<std::string>& items, const ShardSpec& s) {
  if (s.count <= 1) return items;
  std::vector<std::string> out;
  for (size_t i = static_cast<size_t>(s.index); i < items.size(); i += static_cast<size_t>(s.count))
    out.push_back(items[i]);
  return out;
}

}  // namespace kiln::data
