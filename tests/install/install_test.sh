#!/usr/bin/env bash
# kiln as an installed library, used from outside the project: `cmake --install` into a temporary
# prefix, the layout (libkiln.so with its SONAME, libkiln.a, public headers only, the CMake package,
# kiln.pc, the CUDA plugin linking libkiln.so), each public header compiling on its own, and
# examples/embed built as an outside project four ways (find_package(kiln) with kiln::kiln, with
# kiln::kiln_static, pkg-config, and find_package against the release tarball), each run on Fashion-MNIST test images with its logits
# compared to the build tree's `kiln run` (1e-5) and its classes to the labels.
#
# usage: install_test.sh REPO BUILD_DIR
set -uo pipefail
repo=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
source "$repo/tests/cli/check_lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix with space"
version=$(sed -n 's/^project(kiln VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
soversion=${version%.*}

check "cmake --install" 0 "Installing: .*libkiln.so.$version" -- cmake --install "$build" --prefix "$prefix"
lib=$prefix/lib
check "libkiln.so's SONAME is libkiln.so.$soversion" 0 "SONAME.*\[libkiln.so.$soversion\]" -- readelf -d "$lib/libkiln.so.$version"
check "libkiln.so links to the SONAME" 0 "libkiln.so.$soversion" -- readlink "$lib/libkiln.so"
check "libkiln.a holds the ops and the CPU kernels" 0 "conv_onednn" -- ar t "$lib/libkiln.a"
check "headers: the public API" 0 "session.h" -- ls "$prefix/include/kiln"
check "headers: version.h generated" 0 "KILN_VERSION_TEXT \"$version\"" -- cat "$prefix/include/kiln/version.h"
check "no internal headers installed" 0 "^0$" -- bash -c "find '$prefix/include' -name '*.h' -not -path '*/include/kiln/*' | wc -l"
check "the CMake package" 0 "kilnConfigVersion.cmake" -- ls "$lib/cmake/kiln"
check "the program's run path" 0 'RUNPATH.*\$ORIGIN/../lib' -- readelf -d "$prefix/bin/kiln"
check "the installed program runs" 0 "kiln $version" -- "$prefix/bin/kiln" --version
check "the program uses the installed libkiln" 0 "libkiln.so.$soversion => $prefix/bin/../lib/" -- ldd "$prefix/bin/kiln"
if [ -f "$build/tools/kiln/libkiln_cuda.so" ]; then
  check "the CUDA plugin needs libkiln.so" 0 "NEEDED.*libkiln.so.$soversion" -- readelf -d "$lib/libkiln_cuda.so"
  check "the CUDA plugin's run path" 0 'RUNPATH.*\$ORIGIN' -- readelf -d "$lib/libkiln_cuda.so"
  # Found next to the installed libkiln.so (not in the build tree): doctor names the path.
  check "doctor finds the installed plugin" 0 "$lib/libkiln_cuda.so" -- "$prefix/bin/kiln" doctor
fi

# Every public header compiles alone.
for h in "$prefix"/include/kiln/*.h; do
  echo "#include <kiln/$(basename "$h")>" > "$tmp/header.cc"
  check "header $(basename "$h") stands alone" 0 "" -- \
    g++ -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I "$prefix/include" "$tmp/header.cc"
done

# The inputs: the first 16 Fashion-MNIST test images (the demo's data) as raw float32 files, and the
# build tree's `kiln run` on them as the reference.
model=$repo/demo/fashion_mnist_cnn.onnx
n=16
/usr/bin/python3 - "$repo/demo" "$tmp/in" "$n" <<'PY' || { echo "FAIL: could not write the inputs"; exit 1; }
import os, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from fmnist_data import DATA_DIR, load_split, normalize
out, n = sys.argv[2], int(sys.argv[3])
os.makedirs(out)
images, labels = load_split("t10k", DATA_DIR)
x = normalize(images[:n]).astype(np.float32)
np.save(f"{out}/batch.npy", x)
np.save(f"{out}/labels.npy", labels[:n].astype(np.int64))
for i in range(n):
    x[i].tofile(f"{out}/{i}.f32")
PY
check "reference: kiln run (build tree)" 0 "" -- "$build/tools/kiln/kiln" run "$model" --input "input=$tmp/in/batch.npy" --output-dir "$tmp/ref"

# compare EXE: its logits on each image against the reference; its classes against the labels.
compare() {
  local exe=$1
  for i in $(seq 0 $((n - 1))); do "$exe" "$model" "$tmp/in/$i.f32" || return 1; done > "$tmp/out.txt"
  /usr/bin/python3 - "$tmp/out.txt" "$tmp/ref/logits.npy" "$tmp/in/labels.npy" <<'PY'
import sys
import numpy as np
lines = [l for l in open(sys.argv[1]) if l.startswith("values:")]
got = np.array([[float(v) for v in l.split()[1:]] for l in lines])
ref, labels = np.load(sys.argv[2]), np.load(sys.argv[3])
assert got.shape == ref.shape, f"shape {got.shape} vs {ref.shape}"
err = float(np.abs(got - ref).max())
assert err <= 1e-5 * max(1.0, float(np.abs(ref).max())), f"max |diff| {err}"
correct = int((got.argmax(1) == labels).sum())
assert correct == int((ref.argmax(1) == labels).sum())
print(f"ok: {len(got)} images, max |diff| {err:.2e} against kiln run, {correct}/{len(got)} correct")
PY
}

configure_build() {  # DIR ARGS...: the example as an outside project
  local dir=$1; shift
  cmake -S "$repo/examples/embed" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" "$@" > "$dir.log" 2>&1 && cmake --build "$dir" >> "$dir.log" 2>&1 \
    || { cat "$dir.log"; return 1; }
  echo built
}
check "examples/embed builds with find_package(kiln) (kiln::kiln)" 0 "built" -- configure_build "$tmp/embed"
check "embed (shared) runs against the installed libkiln.so" 0 "libkiln.so.$soversion => $lib/" -- ldd "$tmp/embed/embed"
check "embed (shared): top class and logits" 0 "^ok: $n images" -- compare "$tmp/embed/embed"
check "embed prints the library and header versions" 0 "kiln $version \(headers $version\)" -- "$tmp/embed/embed" "$model"
check "examples/embed builds with kiln::kiln_static" 0 "built" -- configure_build "$tmp/embed_static" -DEMBED_STATIC=ON
check "embed (static) needs no libkiln.so" 1 "" -- bash -c "ldd '$tmp/embed_static/embed' | grep -q libkiln"
check "embed (static): top class and logits" 0 "^ok: $n images" -- compare "$tmp/embed_static/embed"
# pkg-config's output cannot carry a space in a path: reach the prefix through a link without one.
ln -s "$prefix" "$tmp/pc_prefix"
check "examples/embed builds with pkg-config" 0 "" -- bash -c "g++ -std=c++20 -O1 \
  '$repo/examples/embed/main.cc' -o '$tmp/embed_pc' \
  \$(PKG_CONFIG_PATH='$tmp/pc_prefix/lib/pkgconfig' pkg-config --cflags --libs kiln) \
  -Wl,-rpath,'$tmp/pc_prefix/lib'"
check "embed (pkg-config): top class and logits" 0 "^ok: $n images" -- compare "$tmp/embed_pc"
# The release tarball's CMake package (scripts/package.sh; no libkiln.a there) serves as well.
if command -v patchelf > /dev/null; then
  check "package.sh" 0 "tar.gz" -- bash "$repo/scripts/package.sh" --no-build --build-dir "$build" --out-dir "$tmp/dist"
  mkdir -p "$tmp/release" && tar -xzf "$tmp"/dist/kiln-*.tar.gz -C "$tmp/release"
  prefix=$(echo "$tmp"/release/kiln-*)
  check "examples/embed builds against the release tarball" 0 "built" -- configure_build "$tmp/embed_release"
  check "embed (release): top class and logits" 0 "^ok: $n images" -- compare "$tmp/embed_release/embed"
  check "the release has no static library" 0 "^absent$" -- bash -c "[ -e '$prefix/lib/libkiln.a' ] && echo present || echo absent"
fi
check "a model that is not there: the error, exit 1" 1 "NotFound|cannot open|No such" -- "$tmp/embed/embed" "$tmp/missing.onnx"

echo "install_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
