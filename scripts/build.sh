#!/usr/bin/env bash
# Configures and builds kiln (release preset; CUDA code too when a toolkit is found).
# usage: scripts/build.sh [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."
# The Python extension needs the pinned nanobind of the check venv (tests/pyenv/check_venv.py,
# made on first use); without the package index it is left out, and its tests say so.
py_args=()
if nb_dir=$(/usr/bin/python3 tests/pyenv/check_venv.py nanobind-dir 2> build-venv.log); then
  py_args=(-DKILN_BUILD_PYTHON=ON "-Dnanobind_DIR=$nb_dir" -DPython_EXECUTABLE=/usr/bin/python3)
else
  echo "build.sh: the Python package is not built: no pinned nanobind ($(tail -n 1 build-venv.log))" >&2
  py_args=(-DKILN_BUILD_PYTHON=OFF)
fi
cmake --preset release "${py_args[@]}" "$@" > build-configure.log 2>&1 || { cat build-configure.log >&2; exit 1; }
grep -E "kiln: CUDA" build-configure.log || true
ninja -C build/release -j"$(nproc)"
