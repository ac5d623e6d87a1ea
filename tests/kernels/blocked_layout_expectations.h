// Which expected kernels a test may miss on this CPU. oneDNN's convolutions write 8-channel
// blocked outputs (nChw8c, "@aBcd8b" in a plan) on CPUs without AVX-512 and channels-last or
// 16-channel blocked ones on AVX-512 CPUs. kiln's channel loops cpu.mul.channel_scale and
// cpu.globalaveragepool.channels and --tune's 1x1-as-matmul variant decline blocked inputs, so
// after a convolution on an AVX2-only CPU they are not selected and oneDNN's kernel runs instead.
// The oneDNN Split (channel offsets off the block boundaries) then gets its input converted to
// plain, where it leaves small tensors to the reference kernel's copies. BatchNormalization's
// loop, which no other fast kernel stands in for, gets its input converted: no waiver. Tests still
// compare the outputs with the reference there; only the "was this kernel selected" expectation is
// waived, and only for those kernels, only when the plan shows an 8-channel blocked tensor, and
// only on a CPU below AVX-512.
#pragma once

#include <cstdio>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

namespace kiln::testing {

inline bool KernelMayBeDeclinedForBlockedLayout(const std::string& plan,
                                                const std::string& kernel) {
  static const char* const kDeclinesBlocked[] = {
      "cpu.mul.channel_scale", "cpu.globalaveragepool.channels", "cpu.split.onednn",
      "cpu.fusedconv.onednn[matmul]", "cpu.conv.onednn[matmul]"};
  bool listed = false;
  for (const char* k : kDeclinesBlocked) listed |= kernel == k;
  if (!listed) return false;
  const bool below_avx512 = dnnl::get_effective_cpu_isa() < dnnl::cpu_isa::avx512_core;
  const bool blocked8 =
      plan.find("8b\n") != std::string::npos || plan.find("8b ") != std::string::npos;
  if (below_avx512 && blocked8)
    std::printf(
        "note: %s not selected: this CPU's convolutions write 8-channel blocked tensors, "
        "which it declines (outputs still checked against the reference)\n",
        kernel.c_str());
  return below_avx512 && blocked8;
}

}  // namespace kiln::testing
