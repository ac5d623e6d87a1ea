#!/usr/bin/env bash
# The release tarball in a minimal Debian root: scripts/package.sh makes it from the build, it is
# unpacked into a debootstrap'ed bookworm (variant minbase: no -dev package, no oneDNN, protobuf,
# libonnx, TurboJPEG or libpng, no Python) under a folder whose name has a space, and there:
# ldd finds every library, `kiln doctor` runs (and reports cuDNN/cuBLAS missing), `kiln selftest
# --device cpu` passes with the bundled model, `kiln run` classifies the 10,000 Fashion-MNIST test
# images from a tensor file and from PNG files at the demo's 91.25 % (checked outside the root,
# which has no Python), and gpu_check.sh exits 3 ("nothing checked") in under a minute.
#
# usage: release_test.sh REPO BUILD_DIR
# The minimal root is made once and kept in $KILN_MINROOT (default /var/cache/kiln/minroot-bookworm;
# about 200 MB, a minute to make). Needs root (chroot, mount) and Debian's mirror; skips (tests/skip.sh) when
# not root.
set -uo pipefail
repo=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
source "$repo/tests/cli/check_lib.sh"
source "$repo/tests/skip.sh"

if [ "$(id -u)" -ne 0 ]; then
  kiln_skip "needs root for chroot and mount (run as root, as CI does)"
fi
for tool in debootstrap chroot patchelf; do
  command -v $tool > /dev/null || { echo "FAIL: $tool not found (scripts/setup.sh installs it)"; exit 1; }
done

root=${KILN_MINROOT:-/var/cache/kiln/minroot-bookworm}
mkdir -p "$(dirname "$root")"
exec 9> "$root.lock"
flock 9
if [ ! -f "$root/.kiln-minroot-complete" ]; then
  rm -rf "$root.partial"
  echo "making the minimal root $root (debootstrap --variant=minbase bookworm) ..."
  if ! debootstrap --variant=minbase bookworm "$root.partial" http://deb.debian.org/debian \
       > "$root.debootstrap.log" 2>&1; then
    echo "FAIL: debootstrap failed:"; tail -n 20 "$root.debootstrap.log"; exit 1
  fi
  rm -rf "$root"
  mv "$root.partial" "$root"
  touch "$root/.kiln-minroot-complete"
fi

work=$(mktemp -d)
inside=/opt/kiln\ release-test.$$          # path inside the root; a space tests relocation
cleanup() {
  umount "$root/proc" 2> /dev/null
  rm -rf "$work" "$root$inside"
}
trap cleanup EXIT

# The root must really lack what kiln bundles.
dev_pkgs=$(chroot "$root" dpkg-query -W -f='${Package}\n' | grep -E -- '-dev$|dnnl|protobuf|onnx|turbojpeg|libpng|python3$' | tr '\n' ' ')
check "minimal root has no -dev package, oneDNN, protobuf, libonnx, TurboJPEG, libpng or Python" 0 '^$' -- echo "$dev_pkgs"

t0=$(date +%s)
pkg_out=$(bash "$repo/scripts/package.sh" --no-build --build-dir "$build" --out-dir "$work/dist" 2>&1)
echo "$pkg_out"
tarball=$(ls "$work"/dist/kiln-*-linux-x86_64.tar.gz 2> /dev/null | head -n 1)
check "package.sh makes the tarball" 0 'tar.gz' -- echo "${tarball:-none}"
[ -n "$tarball" ] || { echo "$passed passed, $((failed)) failed"; exit 1; }
size_kib=$(du -k "$tarball" | cut -f1)
echo "tarball: $(basename "$tarball"), $size_kib KiB compressed (packaged in $(( $(date +%s) - t0 )) s)"
check "tarball under 60 MB compressed ($size_kib KiB)" 0 'ok' -- \
  bash -c "[ $size_kib -lt $((60 * 1024)) ] && echo ok"

mkdir -p "$root$inside"
tar -C "$root$inside" -xzf "$tarball"
name=$(basename "$tarball" .tar.gz)
rel=$inside/$name
mount -t proc proc "$root/proc" || { echo "FAIL: cannot mount /proc in the root"; exit 1; }
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root "$@"; }

check "manifest lists the bundled libraries" 0 'libdnnl' -- cat "$root$rel/share/kiln/MANIFEST.json"
check "licences of bundled libraries" 0 'copyright' -- ls "$root$rel/share/kiln/licenses"
check "headers with the generated version.h" 0 'KILN_VERSION_TEXT "[0-9]+\.[0-9]+\.[0-9]+"' -- \
  cat "$root$rel/include/kiln/version.h"
check "ldd: kiln finds every library in the root" 0 'libdnnl.so.* => /opt/kiln' -- \
  bash -c "out=\$(chroot '$root' ldd '$rel/bin/kiln'); echo \"\$out\"; ! grep -q 'not found' <<< \"\$out\""
for so in "$root$rel"/lib/*.so*; do
  base=$(basename "$so")
  [ "$base" = libkiln_cuda.so ] && continue
  check "ldd: lib/$base resolves" 0 '' -- \
    bash -c "out=\$(chroot '$root' ldd '$rel/lib/$base'); ! grep -q 'not found' <<< \"\$out\" || { echo \"\$out\"; exit 1; }"
done
if [ -f "$root$rel/lib/libkiln_cuda.so" ]; then
  check "ldd: the CUDA plugin needs only NVIDIA libraries from outside" 0 '' -- \
    bash -c "out=\$(chroot '$root' ldd '$rel/lib/libkiln_cuda.so' | grep 'not found' | grep -vE 'libcu(dnn|blas|blasLt)\\.so'); [ -z \"\$out\" ] || { echo \"\$out\"; exit 1; }"
fi

check "kiln --version" 0 '[0-9]+\.[0-9]+\.[0-9]+' -- in_root "$rel/bin/kiln" --version
check "kiln doctor runs in the root" 0 'oneDNN' -- in_root "$rel/bin/kiln" doctor
if [ -f "$root$rel/lib/libkiln_cuda.so" ]; then
  check "doctor finds the plugin and says cuDNN is missing" 0 'plugin needs +libcudnn\.so\.[0-9]+: NOT FOUND' -- \
    in_root "$rel/bin/kiln" doctor
  # Unavailable is exit 17 (10 + StatusCode::kUnavailable).
  check "--device cuda without cuDNN: exit 17 and a clear error naming the missing library" 17 'libcudnn' -- \
    in_root "$rel/bin/kiln" bench "$rel/share/kiln/demo/fashion_mnist_cnn.onnx" --device cuda -n 1 -w 0
fi
check "selftest --device cpu passes with the bundled model" 0 'model .*fashion_mnist_cnn\.onnx' -- \
  in_root "$rel/bin/kiln" selftest --device cpu
check "gpu_check.sh without a GPU: nothing checked (3)" 3 'NOTHING CHECKED' -- \
  in_root timeout 60 "$rel/share/kiln/scripts/gpu_check.sh" --out /tmp/gpu_check_out

# The demo inside the root; its accuracy computed outside (the root has no Python).
/usr/bin/python3 "$repo/demo/prepare_data.py" "$root$rel/fmnist" > /dev/null
check "kiln run on the demo tensor file" 0 'run [0-9.]+ ms' -- \
  in_root "$rel/bin/kiln" run "$rel/share/kiln/demo/fashion_mnist_cnn.onnx" \
    --input "$rel/fmnist/images.npy" --output-dir "$rel/fmnist/out"
check "demo accuracy from the tensor file: 91.25 %" 0 '91\.25% \(9125/10000\)' -- \
  /usr/bin/python3 "$repo/demo/accuracy.py" "$root$rel/fmnist/out/logits.npy" "$root$rel/fmnist/labels.npy"
/usr/bin/python3 "$repo/demo/export_images.py" "$root$rel/fmnist/png" > /dev/null
check "kiln run --images (PNG decode through the bundled libpng)" 0 '' -- \
  in_root "$rel/bin/kiln" run "$rel/share/kiln/demo/fashion_mnist_cnn.onnx" \
    --images "$rel/fmnist/png/images" --recipe fashion-mnist --labels "$rel/fmnist/png/labels.txt" \
    --batch 256 --out "$rel/fmnist/records.jsonl"
check "demo accuracy from PNG files: 91.25 %" 0 '91\.25% \(9125/10000\)' -- \
  /usr/bin/python3 "$repo/demo/records_accuracy.py" "$root$rel/fmnist/records.jsonl"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
