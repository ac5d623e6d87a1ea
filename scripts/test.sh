#!/usr/bin/env bash
# README command 2: installs what is needed, builds, and runs the default test suite
# (every CTest test except those labelled slow or gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# KILN_BUILD_ARGS: extra CMake arguments (.ci/run passes -DKILN_WITH_CUDA=ON).
# shellcheck disable=SC2086
bash scripts/build.sh ${KILN_BUILD_ARGS:-}
ctest --preset release -j2 "$@"
