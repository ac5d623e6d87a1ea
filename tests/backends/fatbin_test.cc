// The fatbin/ELF reader (src/backends/cuda/fatbin.h) on synthetic inputs built here, header by
// header: well-formed sections, then malformed and truncated ones, which must give an error Status
// and never read out of bounds (the asan preset runs this too). Also the GPU verdict and JIT cache
// rules (gpu_compat.h) and the version formatting of cuda_probe.h.
#include "backends/cuda/fatbin.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_probe.h"
#include "backends/cuda/gpu_compat.h"

namespace kiln::cuda {
namespace {

using Bytes = std::vector<uint8_t>;

template <typename T>
void Put(Bytes& b, size_t off, T v) {
  if (b.size() < off + sizeof(T)) b.resize(off + sizeof(T));
  std::memcpy(b.data() + off, &v, sizeof(T));
}

struct EntrySpec {
  uint16_t kind = 2;
  uint32_t arch = 80;
  uint32_t payload = 40;  // bytes of payload, padded to 8
  uint32_t header_bytes = 64;
  uint32_t compressed = 0;
  uint64_t uncompressed = 0;
};

Bytes Entry(const EntrySpec& s) {
  const uint64_t padded = (s.payload + 7) / 8 * 8;
  Bytes b(s.header_bytes + padded, 0);
  Put<uint16_t>(b, 0, s.kind);
  Put<uint16_t>(b, 2, 0x0101);
  Put<uint32_t>(b, 4, s.header_bytes);
  Put<uint64_t>(b, 8, padded);
  Put<uint32_t>(b, 16, s.compressed);
  Put<uint16_t>(b, 24, s.kind == 1 ? 0 : 8);  // code version minor
  Put<uint16_t>(b, 26, s.kind == 1 ? 9 : 1);  // major
  Put<uint32_t>(b, 28, s.arch);
  Put<uint64_t>(b, 40, s.compressed ? 0x8011 : 0x11);
  Put<uint64_t>(b, 56, s.uncompressed);
  for (size_t i = s.header_bytes; i < s.header_bytes + s.payload; ++i) b[i] = 0xAB;
  return b;
}

Bytes Container(const std::vector<EntrySpec>& entries) {
  Bytes body;
  for (const auto& e : entries) {
    Bytes x = Entry(e);
    body.insert(body.end(), x.begin(), x.end());
  }
  Bytes b(16 + body.size(), 0);
  Put<uint32_t>(b, 0, kFatbinMagic);
  Put<uint16_t>(b, 4, 1);
  Put<uint16_t>(b, 6, 16);
  Put<uint64_t>(b, 8, body.size());
  std::copy(body.begin(), body.end(), b.begin() + 16);
  return b;
}

// What nvcc emits for -gencode 75..90 real + compute_90: five cubins and one compressed PTX.
Bytes KilnLikeSection() {
  std::vector<EntrySpec> e;
  for (uint32_t a : {75u, 80u, 86u, 89u}) e.push_back({2, a, 1000 + a});
  e.push_back({1, 90, 45, 80, 45, 5724});
  e.push_back({2, 90, 1200});
  Bytes s = Container(e);
  // A second object's container after 8-byte alignment padding, with an older arch and no PTX.
  s.resize((s.size() + 7) / 8 * 8 + 8, 0);
  Bytes c2 = Container({{2, 86, 17}});
  s.insert(s.end(), c2.begin(), c2.end());
  return s;
}

// A minimal ELF64 little-endian file holding the given sections.
Bytes Elf(const std::vector<std::pair<std::string, Bytes>>& sections) {
  Bytes f(64, 0);
  const uint8_t magic[4] = {0x7f, 'E', 'L', 'F'};
  std::memcpy(f.data(), magic, sizeof(magic));
  f[4] = 2;  // ELFCLASS64
  f[5] = 1;  // little-endian
  f[6] = 1;
  std::vector<std::pair<uint64_t, uint64_t>> where;  // offset, size
  Bytes names(1, 0);
  std::vector<uint32_t> name_off;
  for (const auto& [name, data] : sections) {
    where.push_back({f.size(), data.size()});
    f.insert(f.end(), data.begin(), data.end());
    name_off.push_back(static_cast<uint32_t>(names.size()));
    names.insert(names.end(), name.begin(), name.end());
    names.push_back(0);
  }
  const uint32_t shstr_name = static_cast<uint32_t>(names.size());
  const std::string shstrtab = ".shstrtab";
  names.insert(names.end(), shstrtab.begin(), shstrtab.end());
  names.push_back(0);
  const uint64_t names_off = f.size();
  f.insert(f.end(), names.begin(), names.end());
  f.resize((f.size() + 7) / 8 * 8, 0);
  const uint64_t shoff = f.size();
  const uint16_t shnum = static_cast<uint16_t>(sections.size() + 2);
  f.resize(shoff + 64ull * shnum, 0);  // section 0 is the null section
  auto header = [&](size_t i, uint32_t name, uint32_t type, uint64_t off, uint64_t size) {
    const size_t h = shoff + 64 * i;
    Put<uint32_t>(f, h, name);
    Put<uint32_t>(f, h + 4, type);
    Put<uint64_t>(f, h + 0x18, off);
    Put<uint64_t>(f, h + 0x20, size);
  };
  for (size_t i = 0; i < sections.size(); ++i)
    header(i + 1, name_off[i], 1, where[i].first, where[i].second);
  header(shnum - 1, shstr_name, 3, names_off, names.size());
  Put<uint64_t>(f, 0x28, shoff);
  Put<uint16_t>(f, 0x3A, 64);
  Put<uint16_t>(f, 0x3C, shnum);
  Put<uint16_t>(f, 0x3E, shnum - 1);
  return f;
}

TEST(FatbinTest, ParsesNvccLikeSection) {
  Bytes s = KilnLikeSection();
  auto parsed = ParseFatbinSection(s.data(), s.size());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->size(), 2u);
  const FatbinContainer& c = (*parsed)[0];
  EXPECT_EQ(c.version, 1);
  EXPECT_EQ(c.header_bytes, 16);
  ASSERT_EQ(c.entries.size(), 6u);
  EXPECT_TRUE(c.entries[0].is_elf());
  EXPECT_EQ(c.entries[0].arch, 75u);
  EXPECT_EQ(c.entries[0].payload_bytes, 1080u);  // 1075 padded to 8
  EXPECT_FALSE(c.entries[0].compressed());
  EXPECT_EQ(c.entries[0].code_major, 1);
  EXPECT_EQ(c.entries[0].code_minor, 8);
  const FatbinEntry& ptx = c.entries[4];
  EXPECT_TRUE(ptx.is_ptx());
  EXPECT_EQ(ptx.arch, 90u);
  EXPECT_EQ(ptx.header_bytes, 80u);
  EXPECT_TRUE(ptx.compressed());
  EXPECT_EQ(ptx.uncompressed_bytes, 5724u);
  EXPECT_EQ(ptx.code_major, 9);

  EmbeddedCode code = Summarize(std::move(*parsed));
  EXPECT_EQ(code.sass, (std::vector<int>{75, 80, 86, 89, 90}));
  EXPECT_EQ(code.ptx, (std::vector<int>{90}));
  EXPECT_EQ(code.estimated_jit_bytes, 1200u);  // the largest cubin of the container with PTX
}

TEST(FatbinTest, EmptySectionHasNoContainers) {
  auto parsed = ParseFatbinSection(nullptr, 0);
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->empty());
  Bytes zeros(24, 0);
  parsed = ParseFatbinSection(zeros.data(), zeros.size());
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->empty());
}

void ExpectMalformed(const Bytes& b, const std::string& needle) {
  auto parsed = ParseFatbinSection(b.data(), b.size());
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find(needle), std::string::npos) << parsed.status().message();
}

TEST(FatbinTest, MalformedHeadersAreErrors) {
  const Bytes good = Container({{2, 80, 40}});
  Bytes b = good;
  Put<uint32_t>(b, 0, 0x12345678);
  ExpectMalformed(b, "bad magic 0x12345678");
  b = good;
  Put<uint64_t>(b, 8, good.size());  // claims more entry bytes than remain
  ExpectMalformed(b, "bytes of entries");
  b = good;
  Put<uint16_t>(b, 6, 8);
  ExpectMalformed(b, "container header size 8");
  b = good;
  Put<uint32_t>(b, 16 + 4, 32);  // entry header smaller than 64
  ExpectMalformed(b, "entry header size 32");
  b = good;
  Put<uint32_t>(b, 16 + 4, 1u << 31);
  ExpectMalformed(b, "entry header size");
  b = good;
  Put<uint64_t>(b, 16 + 8, ~0ull);  // payload size that would wrap around
  ExpectMalformed(b, "runs past the container end");
  b = good;
  Put<uint32_t>(b, 16 + 16, 4096);
  ExpectMalformed(b, "compressed size 4096");
  b = good;
  Put<uint64_t>(b, 8, 20);  // entries region too short for one entry header
  b.resize(16 + 20);
  ExpectMalformed(b, "entry header truncated");
  ExpectMalformed(Bytes{0x50, 0xED, 0x55, 0xBA, 1, 0}, "container header truncated");
}

TEST(FatbinTest, EveryTruncationIsHandled) {
  const Bytes s = KilnLikeSection();
  auto full = ParseFatbinSection(s.data(), s.size());
  ASSERT_TRUE(full.ok());
  const size_t first_end = (*full)[0].header_bytes + (*full)[0].entries_bytes;
  const size_t second_start = (*full)[1].offset;
  for (size_t n = 0; n < s.size(); ++n) {
    Bytes cut(s.begin(), s.begin() + n);  // exact-size copy, so ASan sees any over-read
    auto parsed = ParseFatbinSection(cut.data(), cut.size());
    const bool boundary = n == 0 || (n >= first_end && n <= second_start);
    EXPECT_EQ(parsed.ok(), boundary) << "length " << n;
  }
}

TEST(FatbinTest, RandomCorruptionNeverCrashes) {
  const Bytes s = KilnLikeSection();
  std::mt19937 rng(1234);
  int errors = 0;
  for (int i = 0; i < 3000; ++i) {
    Bytes b = s;
    for (int k = 0; k < 4; ++k) b[rng() % std::min<size_t>(b.size(), 600)] = rng() & 0xFF;
    auto parsed = ParseFatbinSection(b.data(), b.size());
    if (!parsed.ok()) {
      ++errors;
      continue;
    }
    for (const auto& c : *parsed)
      for (const auto& e : c.entries)
        EXPECT_LE(e.offset + e.header_bytes + e.payload_bytes, b.size());
  }
  EXPECT_GT(errors, 0);
}

TEST(ElfTest, FindsSections) {
  const Bytes fatbin = KilnLikeSection();
  const Bytes elf = Elf({{".text", Bytes(10, 0x90)}, {".nv_fatbin", fatbin}});
  auto sec = ElfSection(elf.data(), elf.size(), ".nv_fatbin");
  ASSERT_TRUE(sec.ok()) << sec.status().ToString();
  EXPECT_EQ(*sec, fatbin);
  auto missing = ElfSection(elf.data(), elf.size(), ".nv_fat");  // a prefix is not a match
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);

  const std::string path = testing::TempDir() + "/kiln_fatbin_test.elf";
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(elf.data()), elf.size());
  auto code = ReadEmbeddedCode(path);
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(code->sass, (std::vector<int>{75, 80, 86, 89, 90}));
  EXPECT_EQ(code->ptx, (std::vector<int>{90}));
  const Bytes plain = Elf({{".text", Bytes(10, 0x90)}});
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(plain.data()), plain.size());
  code = ReadEmbeddedCode(path);
  ASSERT_TRUE(code.ok());  // a CPU-only binary: no section, no GPU code
  EXPECT_TRUE(code->sass.empty() && code->ptx.empty() && code->containers.empty());
  std::remove(path.c_str());
  EXPECT_EQ(ReadEmbeddedCode(path).status().code(), StatusCode::kNotFound);
}

TEST(ElfTest, MalformedElfIsAnError) {
  const Bytes good = Elf({{".nv_fatbin", KilnLikeSection()}});
  auto bad = [&](Bytes b) { return ElfSection(b.data(), b.size(), ".nv_fatbin").status(); };
  EXPECT_EQ(bad(Bytes{'n', 'o', 'p', 'e'}).code(), StatusCode::kInvalidArgument);
  Bytes b = good;
  b[4] = 1;  // ELFCLASS32
  EXPECT_NE(bad(b).message().find("not a 64-bit"), std::string::npos);
  b = good;
  Put<uint64_t>(b, 0x28, good.size() - 10);
  EXPECT_NE(bad(b).message().find("outside the file"), std::string::npos);
  b = good;
  Put<uint16_t>(b, 0x3E, 200);
  EXPECT_NE(bad(b).message().find("index out of range"), std::string::npos);
  b = good;
  uint64_t shoff = 0;
  std::memcpy(&shoff, b.data() + 0x28, sizeof(shoff));
  Put<uint64_t>(b, shoff + 64 + 0x20, 1ull << 40);  // .nv_fatbin's size beyond the file
  EXPECT_NE(bad(b).message().find("lies outside the file"), std::string::npos);
  for (size_t n = 0; n < good.size(); n += 7) {  // every truncation: an error, never a crash
    Bytes cut(good.begin(), good.begin() + n);
    EXPECT_FALSE(ElfSection(cut.data(), cut.size(), ".nv_fatbin").ok()) << n;
  }
}

TEST(GpuCompatTest, Verdicts) {
  const std::vector<int> sass = {75, 80, 86, 89, 90}, ptx = {90};
  GpuVerdict v = JudgeGpu(8, 6, sass, ptx);
  EXPECT_EQ(v.verdict, Verdict::kNative);
  EXPECT_EQ(v.sass_arch, 86);
  v = JudgeGpu(8, 7, sass, ptx);  // Orin: sm_86 SASS runs on 8.7
  EXPECT_EQ(v.verdict, Verdict::kNative);
  EXPECT_EQ(v.sass_arch, 86);
  v = JudgeGpu(12, 0, sass, ptx);  // Blackwell: compute_90 PTX is JIT-compiled
  EXPECT_EQ(v.verdict, Verdict::kPtxJit);
  EXPECT_EQ(v.ptx_arch, 90);
  EXPECT_NE(v.explanation.find("PTX JIT needed"), std::string::npos);
  v = JudgeGpu(7, 0, sass, ptx);
  EXPECT_EQ(v.verdict, Verdict::kUnsupported);
  v = JudgeGpu(9, 0, {}, {});
  EXPECT_EQ(v.verdict, Verdict::kUnsupported);
  EXPECT_STREQ(VerdictName(Verdict::kPtxJit), "ptx_jit");
}

TEST(GpuCompatTest, JitCacheSettingsAndAdvice) {
  JitCacheSettings s = ReadJitCacheSettings(nullptr, nullptr, nullptr, "/home/u");
  EXPECT_FALSE(s.disabled);
  EXPECT_EQ(s.max_bytes, kJitCacheDefaultBytes);
  EXPECT_EQ(s.path, "/home/u/.nv/ComputeCache");
  EXPECT_TRUE(JitCacheAdvice(s, 1 << 20, true).empty());
  EXPECT_EQ(JitCacheAdvice(s, 1 << 20, false).size(), 1u);  // not writable

  s = ReadJitCacheSettings("1", nullptr, "/tmp/c", nullptr);
  EXPECT_TRUE(s.disabled);
  EXPECT_EQ(s.path, "/tmp/c");
  auto advice = JitCacheAdvice(s, 100, true);
  ASSERT_EQ(advice.size(), 1u);
  EXPECT_NE(advice[0].find("unset CUDA_CACHE_DISABLE"), std::string::npos);

  s = ReadJitCacheSettings("0", "1000", nullptr, nullptr);
  EXPECT_EQ(s.max_bytes, 1000u);
  advice = JitCacheAdvice(s, 5000, true);
  ASSERT_EQ(advice.size(), 1u);
  EXPECT_NE(advice[0].find("does not fit CUDA_CACHE_MAXSIZE=1000"), std::string::npos);
  EXPECT_NE(advice[0].find("at least 10000"), std::string::npos);
  EXPECT_EQ(JitCacheAdvice(s, 600, true).size(), 1u);  // over half of a shared cache
  EXPECT_TRUE(JitCacheAdvice(s, 400, true).empty());

  s = ReadJitCacheSettings(nullptr, "lots", nullptr, nullptr);
  EXPECT_FALSE(s.max_bytes_valid);
  EXPECT_NE(JitCacheAdvice(s, 1, true)[0].find("not a byte count"), std::string::npos);
  EXPECT_EQ(ReadJitCacheSettings(nullptr, "99999999999", nullptr, nullptr).max_bytes,
            kJitCacheMaxBytes);
  EXPECT_EQ(JitCacheAdvice(ReadJitCacheSettings(nullptr, "0", nullptr, nullptr), 1, true).size(),
            1u);
}

TEST(CudaProbeTest, VersionText) {
  EXPECT_EQ(CudaVersionText(13000), "13.0");
  EXPECT_EQ(CudaVersionText(12080), "12.8");
  EXPECT_EQ(CudaVersionText(0), "");
  EXPECT_EQ(CudnnVersionText(91900), "9.19.0");
  EXPECT_EQ(CudnnVersionText(8907), "8.9.7");
  EXPECT_EQ(CublasVersionText(130100), "13.1.0");
}

// A GPU test may skip only on a machine with no driver or no device; with a device listed, or a
// driver that fails otherwise, it must run (and fail with the error).
TEST(CudaProbeTest, AbsentGpuOnlyForNoDriverOrNoDevice) {
  DriverProbe none;
  none.library.soname = "libcuda.so.1";
  none.library.error = "libcuda.so.1: cannot open shared object file";
  EXPECT_NE(AbsentGpuReason(none).find("no NVIDIA driver"), std::string::npos);
  DriverProbe no_device;
  no_device.library.loaded = true;
  no_device.init_code = 100;
  no_device.init_error = "cuInit failed: CUDA_ERROR_NO_DEVICE (100)";
  EXPECT_NE(AbsentGpuReason(no_device).find("finds no device"), std::string::npos);
  DriverProbe stub = no_device;
  stub.init_code = 34;
  EXPECT_NE(AbsentGpuReason(stub), "");
  DriverProbe empty;
  empty.library.loaded = true;
  empty.initialized = true;
  EXPECT_NE(AbsentGpuReason(empty), "");
  // Not absences: a device is listed, or the driver is broken in another way.
  DriverProbe present = empty;
  present.gpus.push_back({0, "NVIDIA H200", 141ull << 30, 9, 0});
  EXPECT_EQ(AbsentGpuReason(present), "");
  DriverProbe broken;
  broken.library.loaded = true;
  broken.init_code = 804;
  broken.init_error = "cuInit failed: CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE (804)";
  EXPECT_EQ(AbsentGpuReason(broken), "");
  DriverProbe lost = present;
  lost.init_error = "cuDeviceGet(1) failed: CUDA_ERROR_UNKNOWN (999)";
  EXPECT_EQ(AbsentGpuReason(lost), "");
}

TEST(CudaProbeTest, MissingLibraryIsReportedNotFatal) {
  LibraryProbe p = ProbeCudnn("libkiln_no_such_library.so.1");
  EXPECT_FALSE(p.loaded);
  EXPECT_NE(p.error.find("libkiln_no_such_library.so.1"), std::string::npos);
}

}  // namespace
}  // namespace kiln::cuda
