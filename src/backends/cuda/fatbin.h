// Reader for the CUDA fat binaries nvcc embeds in host executables, so `kiln doctor` can say which
// GPU architectures kiln's own binary carries without cuobjdump and without the CUDA runtime (plain
// C++: it builds, and is tested, with CUDA off too).
//
// Layout (little-endian, learned from public fatbin readers and checked on nvcc 13 output):
//   ELF section `.nv_fatbin`: one or more containers, each 8-byte aligned, zero padding between.
//   container header, 16 bytes: u32 magic 0xBA55ED50, u16 version (1), u16 header size (16),
//     u64 size of the entries that follow the header.
//   entry header, `header size` bytes (64, or more on newer toolkits):
//     +0 u16 kind (1 PTX, 2 ELF/cubin), +2 u16 version, +4 u32 header size,
//     +8 u64 payload size (padded; the next entry starts at entry + header size + payload size),
//     +16 u32 compressed size (0: not compressed), +24 u16 code version minor, +26 u16 major
//     (PTX ISA version for PTX, cubin format for ELF), +28 u32 arch (e.g. 86 for sm_86 or
//     compute_86), +40 u64 flags (0x8000 and 0x2000: compressed payload), +56 u64 uncompressed
//     payload size (0 when not compressed).
// Only headers are read; payloads are never decompressed. Every offset is bounds-checked: a
// malformed or truncated input yields an error Status, never a crash. Thread-safe (pure functions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln::cuda {

inline constexpr uint32_t kFatbinMagic = 0xBA55ED50u;
inline constexpr size_t kFatbinHeaderBytes = 16;
inline constexpr size_t kFatbinEntryMinBytes = 64;

enum class FatbinKind : uint16_t { kPtx = 1, kElf = 2 };

struct FatbinEntry {
  uint16_t kind = 0;  // FatbinKind, or another value kept as read
  uint16_t version = 0;
  uint32_t header_bytes = 0;
  uint64_t payload_bytes = 0;       // padded size on disk
  uint32_t compressed_bytes = 0;    // 0 when the payload is stored as is
  uint64_t uncompressed_bytes = 0;  // size once decompressed (payload_bytes when not compressed)
  uint16_t code_major = 0;
  uint16_t code_minor = 0;
  uint32_t arch = 0;  // sm_XY / compute_XY as XY
  uint64_t flags = 0;
  size_t offset = 0;  // of the entry header, from the start of the section

  bool is_ptx() const { return kind == static_cast<uint16_t>(FatbinKind::kPtx); }
  bool is_elf() const { return kind == static_cast<uint16_t>(FatbinKind::kElf); }
  bool compressed() const { return compressed_bytes != 0 || (flags & 0xA000u) != 0; }
};

struct FatbinContainer {
  size_t offset = 0;  // from the start of the section
  uint16_t version = 0;
  uint16_t header_bytes = 0;
  uint64_t entries_bytes = 0;  // bytes after the container header
  std::vector<FatbinEntry> entries;
};

// Parses every container of a `.nv_fatbin` section's bytes. An empty section gives no containers.
StatusOr<std::vector<FatbinContainer>> ParseFatbinSection(const uint8_t* data, size_t size);

// The bytes of the section named `name` of the ELF64 little-endian file at `path`. NotFound when
// the file cannot be read or has no such section; InvalidArgument when it is not a well-formed
// ELF64 file.
StatusOr<std::vector<uint8_t>> ReadElfSection(const std::string& path, const std::string& name);
// Same, over an ELF image already in memory; NotFound only when the section is absent.
StatusOr<std::vector<uint8_t>> ElfSection(const uint8_t* data, size_t size,
                                          const std::string& name);

// What a binary carries, summarised: the architectures with SASS (cubin) and with PTX, sorted and
// without duplicates, plus the raw containers.
struct EmbeddedCode {
  std::vector<int> sass;
  std::vector<int> ptx;
  std::vector<FatbinContainer> containers;
  // Bytes a driver JIT would write to its cache when it compiles this binary's PTX: per container
  // with PTX, its largest cubin (or, without cubins, its PTX text), an estimate.
  uint64_t estimated_jit_bytes = 0;
};
EmbeddedCode Summarize(std::vector<FatbinContainer> containers);

// Reads `.nv_fatbin` of the ELF file at `path` and summarises it; a file without the section gives
// an empty EmbeddedCode (not an error).
StatusOr<EmbeddedCode> ReadEmbeddedCode(const std::string& path);

}  // namespace kiln::cuda
