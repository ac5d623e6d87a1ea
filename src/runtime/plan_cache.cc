#include "runtime/plan_cache.h"

#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/cpu_info.h"

namespace kiln::runtime {

namespace {

constexpr char kMagic[] = "kiln plan cache 1\n";
constexpr char kSeparator[] = "\n--\n";

std::string FilePath(const std::string& dir, const std::string& key) {
  return dir + "/" + ContentHash(key) + ".kplan";
}

bool ReadFile(const std::string& path, std::string* bytes) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  f.seekg(0, std::ios::end);
  bytes->assign(static_cast<size_t>(std::max<std::streamoff>(f.tellg(), 0)), '\0');
  f.seekg(0);
  f.read(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  return static_cast<bool>(f);
}

}  // namespace

std::string BuildId() {
  std::string id;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) -> int {
        auto* hex = static_cast<std::string*>(out);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_NOTE) continue;
          const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
          const char* end = p + ph.p_memsz;
          while (p + sizeof(ElfW(Nhdr)) <= end) {
            const auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(p);
            const char* name = p + sizeof(ElfW(Nhdr));
            const char* desc = name + ((nh->n_namesz + 3) & ~3u);
            if (desc + nh->n_descsz > end) break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
                std::memcmp(name, "GNU", 4) == 0) {
              char b[3];
              for (unsigned k = 0; k < nh->n_descsz; ++k) {
                std::snprintf(b, sizeof(b), "%02x", static_cast<unsigned char>(desc[k]));
                *hex += b;
              }
              return 1;
            }
            p = desc + ((nh->n_descsz + 3) & ~3u);
          }
        }
        return 1;  // only the first object: the executable
      },
      &id);
  return id;
}

std::string ContentHash(std::string_view bytes) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ bytes.size();
  auto mix = [&](uint64_t w) {
    h ^= w * 0xBF58476D1CE4E5B9ull;
    h = (h << 31 | h >> 33) * 0x94D049BB133111EBull;
  };
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    mix(w);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, bytes.data() + i, bytes.size() - i);
  mix(tail);
  h ^= h >> 29;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string PlanCacheKey(const std::string& model_hash, const std::vector<Shape>& input_shapes,
                         const SessionOptions& o, const std::string& device,
                         const std::string& library_versions) {
  std::ostringstream k;
  k << "model " << model_hash << "\ninputs";
  for (const Shape& s : input_shapes) k << " " << ShapeToString(s);
  k << "\nbackend " << BackendName(o.backend) << " device " << (device.empty() ? "host" : device)
    << "\nprecision " << PrecisionName(o.precision) << " threads " << o.num_threads << " optimize "
    << o.optimize << " reference_only " << o.reference_only << " tune " << o.tune
    << " disabled_passes";
  for (const auto& p : o.disabled_passes) k << " " << p;
  static const std::string build_id = BuildId();
  k << "\nkiln " << KILN_VERSION_STRING << " build "
    << (build_id.empty() ? std::string(__DATE__ " " __TIME__) : build_id) << "; "
    << library_versions << "\ncpu " << GetCpuInfo().model;
  return k.str();
}

PlanCacheLookupResult PlanCacheLookup(const std::string& dir, const std::string& key) {
  PlanCacheLookupResult r;
  const std::string path = FilePath(dir, key);
  std::string bytes;
  if (!ReadFile(path, &bytes)) {
    r.status = "miss";
    return r;
  }
  auto corrupt = [&](const std::string& why) {
    r.choices.clear();
    r.status = "corrupt (" + path + ": " + why + "): ignored";
    return r;
  };
  const size_t magic = std::strlen(kMagic);
  if (bytes.compare(0, magic, kMagic) != 0) return corrupt("not a kiln plan cache file");
  const size_t sep = bytes.find(kSeparator, magic);
  if (sep == std::string::npos) return corrupt("no end of key");
  if (bytes.compare(magic, sep - magic, key) != 0) {
    r.status = "stale (key differs)";
    return r;
  }
  std::istringstream lines(bytes.substr(sep + std::strlen(kSeparator)));
  std::string line;
  while (std::getline(lines, line)) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos || tab == 0) return corrupt("malformed line '" + line + "'");
    r.choices[line.substr(0, tab)] = line.substr(tab + 1);
  }
  r.hit = true;
  r.status = "hit";
  return r;
}

Status PlanCacheStore(const std::string& dir, const std::string& key, const PlanChoices& choices) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return InvalidArgument("plan cache: cannot create '" + dir + "': " + ec.message());
  const std::string path = FilePath(dir, key);
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << kMagic << key << kSeparator;
    for (const auto& [node, variant] : choices) {
      if (node.find_first_of("\t\n") != std::string::npos ||
          variant.find_first_of("\t\n") != std::string::npos)
        continue;  // a name the format cannot hold: that node is timed again next time
      f << node << '\t' << variant << '\n';
    }
    if (!f.flush()) return InvalidArgument("plan cache: cannot write '" + tmp + "'");
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return InvalidArgument("plan cache: cannot rename into '" + path + "': " + ec.message());
  }
  return OkStatus();
}

}  // namespace kiln::runtime
