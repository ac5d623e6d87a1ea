#!/usr/bin/env bash
# Regenerates the lists that follow from what kiln implements, after adding or changing an op:
#   docs/support-matrix.md                       (kiln ops --markdown; needs a CUDA build)
#   tests/onnx_node/skip_list.txt                (Debian's libonnx-testdata 1.12)
#   tests/onnx_node/skip_list_onnx_1_19.txt      (the onnx 1.19.1 wheel's node tests)
#   tests/onnx_node/ort_known_differences.txt    (cases ONNX Runtime passes and kiln fails)
# Tests fail while any of them is stale (a listed case that now passes, a matrix that differs).
# Read the diff before committing: a case moving from "not implemented" to "fails:" is a bug.
#
# usage: scripts/update_lists.sh [BUILD_DIR]   (default build/release, already built)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
runner=$build/tests/onnx_node/kiln_onnx_node_test
wheel_data=${XDG_CACHE_HOME:-$HOME/.cache}/kiln/onnx-1.19.1/onnx/backend/test/data
"$build/tools/kiln/kiln" ops --markdown > "$root/docs/support-matrix.md"
python3 "$root/tests/onnx_node/update_skip_list.py" "$runner" "$root/tests/onnx_node/skip_list.txt"
if [ -d "$wheel_data" ]; then
  python3 "$root/tests/onnx_node/update_skip_list.py" "$runner" \
    "$root/tests/onnx_node/skip_list_onnx_1_19.txt" --data "$wheel_data"
  python3 "$root/tests/onnx_node/ort_compare.py" "$runner" --write-known | tail -n 1
else
  echo "no onnx 1.19.1 test data at $wheel_data: run ctest -R onnx_node_tests_onnx_1_19 once" >&2
  exit 1
fi
git -C "$root" diff --stat -- docs/support-matrix.md tests/onnx_node
