#!/usr/bin/env bash
# `pip install .` from a clean copy of the tree (scikit-build-core and nanobind from pyproject.toml's
# pinned build requirements, CMake with KILN_BUILD_PYTHON=ON; CUDA off to save the plugin's build)
# into a fresh venv that sees Debian's numpy, then the demo model through kiln.Session at 91.25 %.
# A full build of kiln: about 10 minutes on 2 cores, hence label "slow".
#
# usage: pip_install_test.sh REPO
set -uo pipefail
repo=$(cd "$1" && pwd)
source "$repo/tests/cli/check_lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tree"
(cd "$repo" && git ls-files -z | xargs -0 cp --parents -t "$work/tree")  # the tracked files
check "venv" 0 '' -- /usr/bin/python3 -m venv --system-site-packages "$work/venv"
check "pip install . builds and installs kiln" 0 'Successfully installed kiln' -- \
  "$work/venv/bin/pip" install --no-cache-dir "$work/tree" \
  --config-settings=cmake.define.KILN_WITH_CUDA=OFF
/usr/bin/python3 "$repo/demo/prepare_data.py" "$work/fmnist" > /dev/null
check "demo accuracy through the installed package: 91.25 %" 0 'accuracy 91\.25%' -- \
  bash -c "cd '$work' && '$work/venv/bin/python' -c \"
import kiln, numpy as np
s = kiln.Session('$repo/demo/fashion_mnist_cnn.onnx')
x = np.load('$work/fmnist/images.npy'); y = np.load('$work/fmnist/labels.npy')
hits = int((s.run({'input': x})['logits'].argmax(1) == y).sum())
print(kiln.__file__, f'accuracy {100 * hits / len(y):.2f}%')\""
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
