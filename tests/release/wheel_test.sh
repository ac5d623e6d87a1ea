#!/usr/bin/env bash
# kiln's self-contained wheel (scripts/wheel.sh) in a minimal Debian root that has python3,
# python3-numpy and python3-venv and nothing else (no -dev package, no oneDNN, protobuf, libonnx,
# TurboJPEG or libpng): installed with pip into a venv that sees Debian's numpy (no index: the
# wheel and numpy 1.24 are all it needs), imported (no CUDA library loaded), and the demo model
# classifying the 10,000 Fashion-MNIST test images through kiln.Session at the demo's 91.25 %; a
# device="cuda" session there is a kiln.Unavailable naming what was looked for.
#
# usage: wheel_test.sh REPO BUILD_DIR
# The root is made once with debootstrap and kept in $KILN_MINROOT_PY (default
# /var/cache/kiln/minroot-bookworm-python). Needs root (chroot, mount) and Debian's mirror; skips
# (tests/skip.sh, a failure under CI) when not root.
set -uo pipefail
repo=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
source "$repo/tests/cli/check_lib.sh"
source "$repo/tests/skip.sh"
[ "$(id -u)" -eq 0 ] || kiln_skip "needs root for chroot and mount (run as root, as CI does)"
for tool in debootstrap chroot patchelf; do
  command -v $tool > /dev/null || { echo "FAIL: $tool not found (scripts/setup.sh installs it)"; exit 1; }
done

root=${KILN_MINROOT_PY:-/var/cache/kiln/minroot-bookworm-python}
mkdir -p "$(dirname "$root")"
exec 9> "$root.lock"
flock 9
if [ ! -f "$root/.kiln-minroot-complete" ]; then
  rm -rf "$root.partial"
  echo "making the minimal root $root (debootstrap --variant=minbase, python3, numpy, venv) ..."
  if ! debootstrap --variant=minbase --include=python3,python3-numpy,python3-venv bookworm \
       "$root.partial" http://deb.debian.org/debian > "$root.debootstrap.log" 2>&1; then
    echo "FAIL: debootstrap failed:"; tail -n 20 "$root.debootstrap.log"; exit 1
  fi
  rm -rf "$root"
  mv "$root.partial" "$root"
  touch "$root/.kiln-minroot-complete"
fi

work=$(mktemp -d)
inside=/opt/kiln-wheel-test.$$
cleanup() {
  umount "$root/proc" 2> /dev/null
  rm -rf "$work" "$root$inside"
}
trap cleanup EXIT

dev_pkgs=$(chroot "$root" dpkg-query -W -f='${Package}\n' | grep -E -- '-dev$|dnnl|protobuf|onnx|turbojpeg|libpng' | tr '\n' ' ')
check "the root has no -dev package, oneDNN, protobuf, libonnx, TurboJPEG or libpng" 0 '^$' -- echo "$dev_pkgs"

out=$(bash "$repo/scripts/wheel.sh" --no-build --build-dir "$build" --out-dir "$work/dist" 2>&1)
echo "$out"
wheel=$(ls "$work"/dist/kiln-*.whl 2> /dev/null | head -n 1)
check "wheel.sh makes the wheel" 0 '\.whl' -- echo "${wheel:-none}"
[ -n "$wheel" ] || { echo "$passed passed, $failed failed"; exit 1; }
echo "wheel: $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB"

mkdir -p "$root$inside"
cp "$wheel" "$root$inside/"
/usr/bin/python3 "$repo/demo/prepare_data.py" "$root$inside/fmnist" > /dev/null
cp "$repo/demo/fashion_mnist_cnn.onnx" "$root$inside/"
mount -t proc proc "$root/proc" || { echo "FAIL: cannot mount /proc in the root"; exit 1; }
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root "$@"; }

check "a venv that sees Debian's numpy" 0 '' -- in_root python3 -m venv --system-site-packages "$inside/venv"
check "pip installs the wheel offline" 0 'Successfully installed kiln' -- \
  in_root "$inside/venv/bin/pip" install --no-index --no-cache-dir "$inside/$(basename "$wheel")"
check "import kiln loads no CUDA library" 0 '^ok' -- in_root "$inside/venv/bin/python" -c "
import kiln
maps = open('/proc/self/maps').read()
assert 'libkiln_cuda' not in maps and 'libcudart' not in maps, 'a CUDA library is loaded'
print('ok', kiln.__version__, kiln.__file__)"
check "demo accuracy through kiln.Session: 91.25 %" 0 'accuracy 91\.25% \(9125/10000\)' -- \
  in_root "$inside/venv/bin/python" -c "
import kiln, numpy as np
s = kiln.Session('$inside/fashion_mnist_cnn.onnx')
x = np.load('$inside/fmnist/images.npy'); y = np.load('$inside/fmnist/labels.npy')
logits = np.concatenate([s.run({'input': x[i:i + 500]})['logits'] for i in range(0, len(x), 500)])
hits = int((logits.argmax(1) == y).sum())
print(f'numpy {np.__version__}: accuracy {100 * hits / len(y):.2f}% ({hits}/{len(y)})')
assert s.stats()['inputs_copied'] == 0"
check "device=cuda without a GPU: kiln.Unavailable naming what was looked for" 0 'Unavailable.*(libcuda|CUDA device|cudnn|libcudnn)' -- \
  in_root "$inside/venv/bin/python" -c "
import kiln
try:
    kiln.Session('$inside/fashion_mnist_cnn.onnx', device='cuda')
    print('no error')
except kiln.Unavailable as e:
    print('Unavailable:', e)"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
