#!/usr/bin/env bash
# The test suite under AddressSanitizer and UndefinedBehaviorSanitizer: builds the `asan` preset
# (RelWithDebInfo, -fsanitize=address,undefined, CUDA off) into build/asan and runs its CTest
# suite with the `models` label included. Any ASan report, leak or UBSan report fails the test
# that produced it (UBSAN_OPTIONS=halt_on_error=1: UBSan's checks would otherwise only print).
#
# usage: scripts/sanitize.sh [extra ctest args]
# Left out: gpu and slow (as in the default run), release (it packages the build: an ASan build is
# not a release), install (the outside project would need the sanitizer flags), fuzz (scripts/
# fuzz.sh is itself an ASan+UBSan build), and the malloc-counting test, which is not built under
# sanitizers (their allocators forbid replacing malloc). About 40 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset asan > build-asan-configure.log 2>&1 || { cat build-asan-configure.log >&2; exit 1; }
ninja -C build/asan -j"$(nproc)"
# allocator_may_return_null: the out-of-memory tests ask for impossible sizes on purpose and check
# that kiln reports OutOfMemory; ASan would otherwise abort on the request itself.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:check_initialization_order=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# Checks that measure the resident set leave that part out (ASan's quarantine keeps freed memory).
export KILN_SANITIZER=address,undefined
exec ctest --test-dir build/asan -j"$(nproc)" --output-on-failure -LE "gpu|slow|release|install|fuzz" "$@"
