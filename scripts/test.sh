#!/usr/bin/env bash
# README command 2: installs what is needed, builds, and runs the default test suite
# (every CTest test except those labelled slow or gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
ctest --preset release -j2 "$@"
