#include "runtime/model_store.h"

#include <openssl/evp.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace kiln::runtime {

namespace {

std::string Hex(const unsigned char* d, unsigned n) {
  static const char* kDigits = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (unsigned i = 0; i < n; ++i) {
    s[2 * i] = kDigits[d[i] >> 4];
    s[2 * i + 1] = kDigits[d[i] & 15];
  }
  return s;
}

struct DigestContext {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~DigestContext() { EVP_MD_CTX_free(ctx); }
};

}  // namespace

std::string Sha256Hex(std::string_view bytes) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_Digest(bytes.data(), bytes.size(), d, &n, EVP_sha256(), nullptr);
  return Hex(d, n);
}

StatusOr<std::string> Sha256HexOfFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("cannot open model file '" + path + "'");
  DigestContext c;
  if (c.ctx == nullptr || EVP_DigestInit_ex(c.ctx, EVP_sha256(), nullptr) != 1)
    return Internal("SHA-256 is not available from OpenSSL");
  std::vector<char> buf(1 << 20);
  while (f) {
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (f.gcount() > 0) EVP_DigestUpdate(c.ctx, buf.data(), static_cast<size_t>(f.gcount()));
  }
  if (f.bad()) return NotFound("cannot read model file '" + path + "'");
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_DigestFinal_ex(c.ctx, d, &n);
  return Hex(d, n);
}

StatusOr<FileIdentity> IdentifyFile(const std::string& model_dir, const std::string& location) {
  const std::string path = model_dir.empty() ? location : model_dir + "/" + location;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return NotFound("cannot stat '" + path + "'");
  FileIdentity id;
  id.location = location;
  id.device = static_cast<uint64_t>(st.st_dev);
  id.inode = static_cast<uint64_t>(st.st_ino);
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return id;
}

std::string ModelStoreKey(const std::string& sha256, const SessionOptions& o) {
  std::string k = sha256 + "|backend=" + BackendName(o.backend) +
                  "|precision=" + PrecisionName(o.precision) +
                  "|optimize=" + (o.optimize ? "1" : "0") + "|disabled=";
  for (const std::string& p : o.disabled_passes) k += p + ",";
  return k;
}

ModelStore& ModelStore::Global() {
  static ModelStore* store = new ModelStore();  // never destroyed: sessions may outlive statics
  return *store;
}

bool ModelStore::Matches(const Entry& e, const std::string& model_dir) const {
  for (const FileIdentity& f : e.files) {
    auto now = IdentifyFile(model_dir, f.location);
    if (!now.ok() || !(*now == f)) return false;
  }
  return true;
}

std::shared_ptr<SharedModel> ModelStore::Find(const std::string& key,
                                              const std::string& model_dir) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  std::shared_ptr<SharedModel> live = it->second.model.lock();
  if (!live) {
    entries_.erase(it);
    return nullptr;
  }
  return Matches(it->second, model_dir) ? live : nullptr;
}

std::shared_ptr<SharedModel> ModelStore::Add(const std::string& key, const std::string& model_dir,
                                             std::vector<FileIdentity> files,
                                             std::shared_ptr<SharedModel> made) {
  std::lock_guard<std::mutex> lock(mu_);
  // Expired entries of other keys go too, so the map stays as small as the live models.
  for (auto it = entries_.begin(); it != entries_.end();)
    it = it->second.model.expired() ? entries_.erase(it) : std::next(it);
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    std::shared_ptr<SharedModel> live = it->second.model.lock();
    if (live && Matches(it->second, model_dir)) return live;
  }
  entries_[key] = Entry{made, std::move(files)};
  return made;
}

size_t ModelStore::live_models() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [key, e] : entries_) n += e.model.expired() ? 0 : 1;
  return n;
}

void ReleaseFreeMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

std::shared_ptr<SharedModel> MakeSharedModel(Model model, std::vector<std::string> log) {
  auto* m = new SharedModel{std::move(model), {}, std::move(log)};
  return std::shared_ptr<SharedModel>(m, [](SharedModel* p) {
    delete p;
    // Weights are many large blocks; after free() glibc keeps those below its (adaptive) mmap
    // threshold in its heaps. Giving them back here is what makes closing a session return its
    // memory (tests/runtime/model_store_test.cc measures it).
    ReleaseFreeMemory();
  });
}

}  // namespace kiln::runtime
