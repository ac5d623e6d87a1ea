#!/usr/bin/env bash
# Configures and builds kiln (release preset; CUDA code too when a toolkit is found).
# usage: scripts/build.sh [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release "$@" > build-configure.log 2>&1 || { cat build-configure.log >&2; exit 1; }
grep -E "kiln: CUDA" build-configure.log || true
ninja -C build/release -j"$(nproc)"
