#!/usr/bin/env bash
# ONNX's backend node tests as the pinned onnx wheel ships them (onnx 1.19.1: opsets up to 24),
# run by kiln's node-test runner with their own skip list (skip_list_onnx_1_19.txt).
# The wheel is downloaded once from the Python package index (pip download, no install: only its
# test data is used), checked by sha256 and unpacked into CACHE (default
# ${XDG_CACHE_HOME:-~/.cache}/kiln/onnx-1.19.1). Without the index and without a cached copy the
# test is skipped (tests/skip.sh: exit 77, a failure under CI) with the reason.
#
# usage: onnx_wheel_tests.sh RUNNER [CACHE]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../skip.sh"
runner=$1
cache=${2:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/onnx-1.19.1}
wheel=onnx-1.19.1-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl
sha=1839af08ab4a909e4af936b8149c27f8c64b96138981024e251906e0539d8bf9
data=$cache/onnx/backend/test/data
if [ ! -f "$cache/.complete" ]; then
  mkdir -p "$cache"
  if [ ! -f "$cache/$wheel" ]; then
    # The wheel for CPython 3.11 on manylinux (its test data is the same for every platform).
    if ! /usr/bin/python3 -m pip download --no-deps --only-binary=:all: --python-version 3.11 \
         --platform manylinux2014_x86_64 --implementation cp onnx==1.19.1 -d "$cache" \
         > "$cache/download.log" 2>&1; then
      # Only an index that could not be reached is a skip; pip reaching it and failing is not.
      if /usr/bin/python3 "$here/../pyenv/check_venv.py" unreachable "$cache/download.log"; then
        kiln_skip "cannot reach the package index to download onnx==1.19.1 (see $cache/download.log)"
      fi
      echo "FAIL: pip download of onnx==1.19.1 failed:"; tail -n 20 "$cache/download.log"
      exit 1
    fi
  fi
  echo "$sha  $cache/$wheel" | sha256sum -c --quiet - || { echo "FAIL: $wheel: sha256 differs"; exit 1; }
  (cd "$cache" && /usr/bin/python3 -m zipfile -e "$wheel" unpacked > /dev/null) || { echo "FAIL: cannot unpack $wheel"; exit 1; }
  rm -rf "$cache/onnx" && mv "$cache/unpacked/onnx" "$cache/onnx" && rm -rf "$cache/unpacked"
  touch "$cache/.complete"
fi
KILN_ONNX_TESTDATA_DIR=$data KILN_ONNX_SKIP_LIST=$here/skip_list_onnx_1_19.txt \
  KILN_ONNX_MIN_CASES=1755 exec "$runner"
