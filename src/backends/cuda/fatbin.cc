// Fatbin and ELF64 section reading; layout notes in fatbin.h. All reads go through Read<T>(), which
// checks bounds, and every size taken from the input is checked against what remains before use.
#include "backends/cuda/fatbin.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>

namespace kiln::cuda {
namespace {

template <typename T>
T Read(const uint8_t* data, size_t offset) {
  T v;
  std::memcpy(&v, data + offset, sizeof(T));  // little-endian host assumed (x86-64, aarch64)
  return v;
}

std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

Status Malformed(size_t offset, const std::string& what) {
  return InvalidArgument("malformed fatbin at offset " + Hex(offset) + ": " + what);
}

StatusOr<FatbinEntry> ParseEntry(const uint8_t* data, size_t offset, size_t end) {
  if (end - offset < kFatbinEntryMinBytes)
    return Malformed(offset, "entry header truncated (" + std::to_string(end - offset) +
                                 " bytes left, need " + std::to_string(kFatbinEntryMinBytes) + ")");
  FatbinEntry e;
  e.offset = offset;
  e.kind = Read<uint16_t>(data, offset);
  e.version = Read<uint16_t>(data, offset + 2);
  e.header_bytes = Read<uint32_t>(data, offset + 4);
  e.payload_bytes = Read<uint64_t>(data, offset + 8);
  e.compressed_bytes = Read<uint32_t>(data, offset + 16);
  e.code_minor = Read<uint16_t>(data, offset + 24);
  e.code_major = Read<uint16_t>(data, offset + 26);
  e.arch = Read<uint32_t>(data, offset + 28);
  e.flags = Read<uint64_t>(data, offset + 40);
  e.uncompressed_bytes = Read<uint64_t>(data, offset + 56);
  if (e.uncompressed_bytes == 0 && !e.compressed()) e.uncompressed_bytes = e.payload_bytes;
  if (e.header_bytes < kFatbinEntryMinBytes || e.header_bytes > end - offset)
    return Malformed(offset, "entry header size " + std::to_string(e.header_bytes) +
                                 " outside [64, " + std::to_string(end - offset) + "]");
  if (e.payload_bytes > end - offset - e.header_bytes)
    return Malformed(offset, "entry payload of " + std::to_string(e.payload_bytes) +
                                 " bytes runs past the container end (" +
                                 std::to_string(end - offset - e.header_bytes) + " bytes left)");
  if (e.compressed_bytes > e.payload_bytes)
    return Malformed(offset, "compressed size " + std::to_string(e.compressed_bytes) +
                                 " exceeds the payload size " + std::to_string(e.payload_bytes));
  return e;
}

StatusOr<FatbinContainer> ParseContainer(const uint8_t* data, size_t offset, size_t size) {
  if (size - offset < kFatbinHeaderBytes)
    return Malformed(offset, "container header truncated (" + std::to_string(size - offset) +
                                 " bytes left, need 16)");
  FatbinContainer c;
  c.offset = offset;
  uint32_t magic = Read<uint32_t>(data, offset);
  if (magic != kFatbinMagic)
    return Malformed(offset, "bad magic " + Hex(magic) + ", expected " + Hex(kFatbinMagic));
  c.version = Read<uint16_t>(data, offset + 4);
  c.header_bytes = Read<uint16_t>(data, offset + 6);
  c.entries_bytes = Read<uint64_t>(data, offset + 8);
  if (c.header_bytes < kFatbinHeaderBytes || c.header_bytes > size - offset)
    return Malformed(offset, "container header size " + std::to_string(c.header_bytes) +
                                 " outside [16, " + std::to_string(size - offset) + "]");
  if (c.entries_bytes > size - offset - c.header_bytes)
    return Malformed(offset, "container claims " + std::to_string(c.entries_bytes) +
                                 " bytes of entries, only " +
                                 std::to_string(size - offset - c.header_bytes) + " remain");
  const size_t end = offset + c.header_bytes + c.entries_bytes;
  size_t p = offset + c.header_bytes;
  while (p < end) {
    auto e = ParseEntry(data, p, end);
    if (!e.ok()) return e.status();
    p += e->header_bytes + e->payload_bytes;  // both checked against end - p above
    c.entries.push_back(*e);
  }
  return c;
}

}  // namespace

StatusOr<std::vector<FatbinContainer>> ParseFatbinSection(const uint8_t* data, size_t size) {
  std::vector<FatbinContainer> out;
  if (size > 0 && data == nullptr) return InvalidArgument("fatbin: null data");
  size_t p = 0;
  while (p < size) {
    // Containers of separate objects are concatenated by the linker, each 8-byte aligned; skip the
    // zero padding between them.
    if (data[p] == 0) {
      ++p;
      continue;
    }
    auto c = ParseContainer(data, p, size);
    if (!c.ok()) return c.status();
    p += c->header_bytes + c->entries_bytes;
    out.push_back(std::move(*c));
  }
  return out;
}

StatusOr<std::vector<uint8_t>> ElfSection(const uint8_t* data, size_t size,
                                          const std::string& name) {
  // ELF64 header: e_ident[16], then e_shoff at 0x28 (u64), e_shentsize at 0x3A, e_shnum at 0x3C,
  // e_shstrndx at 0x3E (u16 each). Section header (64 bytes): sh_name u32 at 0, sh_type u32 at 4,
  // sh_offset u64 at 0x18, sh_size u64 at 0x20.
  constexpr size_t kEhdrBytes = 64, kShdrBytes = 64;
  constexpr uint32_t kShtNobits = 8;
  constexpr uint8_t kElfMagic[4] = {0x7f, 'E', 'L', 'F'};
  if (size < kEhdrBytes || std::memcmp(data, kElfMagic, sizeof(kElfMagic)) != 0)
    return InvalidArgument("not an ELF file");
  if (data[4] != 2 || data[5] != 1)
    return InvalidArgument("not a 64-bit little-endian ELF file (class " + std::to_string(data[4]) +
                           ", data " + std::to_string(data[5]) + ")");
  const uint64_t shoff = Read<uint64_t>(data, 0x28);
  const uint16_t shentsize = Read<uint16_t>(data, 0x3A);
  const uint16_t shnum = Read<uint16_t>(data, 0x3C);
  const uint16_t shstrndx = Read<uint16_t>(data, 0x3E);
  if (shnum == 0) return NotFound("no section '" + name + "' (the file has no section headers)");
  if (shentsize < kShdrBytes)
    return InvalidArgument("ELF section header size " + std::to_string(shentsize) + " < 64");
  if (shoff > size || static_cast<uint64_t>(shnum) * shentsize > size - shoff)
    return InvalidArgument("ELF section headers lie outside the file");
  if (shstrndx >= shnum) return InvalidArgument("ELF section name table index out of range");
  auto header = [&](size_t i) { return data + shoff + i * shentsize; };
  auto range = [&](const uint8_t* sh, uint64_t* off, uint64_t* len) -> bool {
    *off = Read<uint64_t>(sh, 0x18);
    *len = Read<uint64_t>(sh, 0x20);
    if (Read<uint32_t>(sh, 4) == kShtNobits) *len = 0;
    return *off <= size && *len <= size - *off;
  };
  uint64_t str_off = 0, str_len = 0;
  if (!range(header(shstrndx), &str_off, &str_len))
    return InvalidArgument("ELF section name table lies outside the file");
  for (size_t i = 0; i < shnum; ++i) {
    const uint8_t* sh = header(i);
    const uint32_t name_off = Read<uint32_t>(sh, 0);
    if (name_off >= str_len) continue;
    const char* s = reinterpret_cast<const char*>(data + str_off + name_off);
    const size_t max_len = str_len - name_off;
    if (strnlen(s, max_len) != name.size() || std::memcmp(s, name.data(), name.size()) != 0)
      continue;
    uint64_t off = 0, len = 0;
    if (!range(sh, &off, &len))
      return InvalidArgument("ELF section '" + name + "' lies outside the file");
    return std::vector<uint8_t>(data + off, data + off + len);
  }
  return NotFound("no section '" + name + "'");
}

namespace {

StatusOr<std::vector<uint8_t>> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("cannot open '" + path + "'");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return NotFound("cannot read '" + path + "'");
  return bytes;
}

}  // namespace

StatusOr<std::vector<uint8_t>> ReadElfSection(const std::string& path, const std::string& name) {
  auto bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  auto s = ElfSection(bytes->data(), bytes->size(), name);
  if (!s.ok()) {
    Status st = s.status();
    st.AddContext("while reading '" + path + "'");
    return st;
  }
  return s;
}

EmbeddedCode Summarize(std::vector<FatbinContainer> containers) {
  EmbeddedCode code;
  std::set<int> sass, ptx;
  for (const FatbinContainer& c : containers) {
    uint64_t largest_cubin = 0, largest_ptx = 0;
    for (const FatbinEntry& e : c.entries) {
      if (e.is_elf()) {
        sass.insert(static_cast<int>(e.arch));
        largest_cubin = std::max(largest_cubin, e.uncompressed_bytes);
      } else if (e.is_ptx()) {
        ptx.insert(static_cast<int>(e.arch));
        largest_ptx = std::max(largest_ptx, e.uncompressed_bytes);
      }
    }
    if (largest_ptx > 0)
      code.estimated_jit_bytes += largest_cubin > 0 ? largest_cubin : largest_ptx;
  }
  code.sass.assign(sass.begin(), sass.end());
  code.ptx.assign(ptx.begin(), ptx.end());
  code.containers = std::move(containers);
  return code;
}

StatusOr<EmbeddedCode> ReadEmbeddedCode(const std::string& path) {
  auto bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  auto section = ElfSection(bytes->data(), bytes->size(), ".nv_fatbin");
  if (!section.ok()) {
    if (section.status().code() == StatusCode::kNotFound) return EmbeddedCode{};
    Status st = section.status();
    st.AddContext("while reading '" + path + "'");
    return st;
  }
  auto containers = ParseFatbinSection(section->data(), section->size());
  if (!containers.ok()) {
    Status st = containers.status();
    st.AddContext("while reading .nv_fatbin of '" + path + "'");
    return st;
  }
  return Summarize(std::move(*containers));
}

}  // namespace kiln::cuda
