#!/usr/bin/env bash
# Makes the relocatable release: dist/kiln-<version>-linux-x86_64.tar.gz.
#
# usage: scripts/package.sh [--build-dir DIR] [--no-build] [--out-dir DIR]
#
# Layout (unpacks to kiln-<version>-linux-x86_64/):
#   bin/kiln                      the command; run path $ORIGIN/../lib
#   lib/libkiln.so.<M.m>          the library (and its libkiln.so link), run path $ORIGIN
#   lib/cmake/kiln/, lib/pkgconfig/kiln.pc
#                                 find_package(kiln) (kiln::kiln) and pkg-config; the static
#                                 libkiln.a is not in the release (`cmake --install` gives it)
#   lib/libkiln_cuda.so           the CUDA backend plugin (CUDA builds); run path $ORIGIN plus the
#                                 toolkit's folders; cuDNN/cuBLAS are looked for at run time
#                                 (src/runtime/plugin_deps.h), never bundled
#   lib/lib*.so.*                 every library the programs need beyond glibc, libstdc++ and
#                                 libgcc_s (oneDNN, protobuf, libonnx, TurboJPEG, libpng, zlib,
#                                 fmt, the OpenMP runtime, ...), each with run path $ORIGIN
#   libexec/kiln/tests/           the gpu-labelled test programs (scripts/gpu_check.sh runs them)
#   include/kiln/                 the public headers
#   share/kiln/demo/              the demo model (selftest's bundled model) and its README
#   share/kiln/scripts/           gpu_check.sh and its PyTorch side, gpu_check_torch.py
#   share/kiln/licenses/          kiln's notice and the Debian copyright file of each bundled library
#   share/kiln/MANIFEST.json      versions: kiln, git commit, compiler, each bundled library and its
#                                 Debian package, what the CUDA plugin was compiled against
# The kiln files come from `cmake --install` (components runtime and devel).
#
# Needs patchelf (scripts/setup.sh installs it). Prints the tarball's path and size last.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
build_dir=build/release
out_dir=dist
do_build=1
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build_dir=$2; shift 2 ;;
    --out-dir) out_dir=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "package.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
command -v patchelf > /dev/null || { echo "package.sh: patchelf not found (run scripts/setup.sh)" >&2; exit 1; }
if [ "$do_build" = 1 ]; then bash scripts/build.sh > /dev/null; fi
kiln_bin=$build_dir/tools/kiln/kiln
[ -x "$kiln_bin" ] || { echo "package.sh: $kiln_bin not found; build first" >&2; exit 1; }

version=$(sed -n 's/^project(kiln VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
name=kiln-$version-linux-x86_64
stage_root=$(mktemp -d)
trap 'rm -rf "$stage_root"' EXIT
stage=$stage_root/$name
mkdir -p "$stage"/{bin,lib,libexec/kiln/tests,include,share/kiln/{demo,scripts,licenses}}

for component in runtime devel; do
  cmake --install "$build_dir" --prefix "$stage" --component $component > /dev/null
done
for t in kiln_cuda_device_test; do  # gpu_check.sh fails without it: a release must carry it
  [ -x "$build_dir/tests/$t" ] || { echo "package.sh: $build_dir/tests/$t not found (build with KILN_BUILD_TESTS=ON)" >&2; exit 1; }
  install -m 755 "$build_dir/tests/$t" "$stage/libexec/kiln/tests/$t"
done
install -m 644 demo/fashion_mnist_cnn.onnx demo/README.md "$stage/share/kiln/demo/"
install -m 755 scripts/gpu_check.sh scripts/gpu_check_torch.py "$stage/share/kiln/scripts/"

# Libraries every Linux system has; everything else a program needs is bundled, except the
# NVIDIA libraries the plugin finds at run time.
is_system() {
  case $(basename "$1") in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*|\
    libresolv.so*|linux-vdso*) return 0 ;;
  esac
  return 1
}
is_nvidia() {
  case $(basename "$1") in
    libcud*|libcublas*|libnv*|libcuda.so*) return 0 ;;
  esac
  return 1
}
declare -A bundled=()  # soname -> source path
elfs=("$stage/bin/kiln" "$stage"/lib/libkiln.so.*.*)
[ -f "$stage/lib/libkiln_cuda.so" ] && elfs+=("$stage/lib/libkiln_cuda.so")
for t in "$stage"/libexec/kiln/tests/*; do [ -f "$t" ] && elfs+=("$t"); done
for elf in "${elfs[@]}"; do
  # ldd lists the whole closure; "not found" for anything other than NVIDIA's is a packaging error.
  while read -r soname arrow path _; do
    [ "$arrow" = "=>" ] || continue
    case $soname in libkiln.so*) continue ;; esac  # installed above
    if [ "$path" = "not" ]; then
      is_nvidia "$soname" && continue
      echo "package.sh: $elf needs $soname, which is not found here" >&2; exit 1
    fi
    is_system "$soname" && continue
    is_nvidia "$soname" && continue
    bundled[$soname]=$path
  done < <(ldd "$elf")
done
for soname in "${!bundled[@]}"; do
  cp -L "${bundled[$soname]}" "$stage/lib/$soname"
  chmod 644 "$stage/lib/$soname"
  patchelf --set-rpath '$ORIGIN' "$stage/lib/$soname"
done
patchelf --set-rpath '$ORIGIN/../lib' "$stage/bin/kiln"
for t in "$stage"/libexec/kiln/tests/*; do [ -f "$t" ] && patchelf --set-rpath '$ORIGIN/../../../lib' "$t"; done
if [ -f "$stage/lib/libkiln_cuda.so" ]; then
  # The usual toolkit folders, as a last resort after the lookups of src/runtime/plugin_deps.h.
  patchelf --set-rpath '$ORIGIN:/usr/local/cuda/lib64:/usr/local/cuda/lib:/usr/local/cuda/targets/x86_64-linux/lib' \
    "$stage/lib/libkiln_cuda.so"
fi
# Regular files only: stripping libkiln.so (a link) would replace the link with a copy.
find "$stage/bin" "$stage/lib" "$stage/libexec" -type f \( -name 'kiln*' -o -name '*.so*' \) \
  -exec strip --strip-unneeded {} + 2> /dev/null || true

# Licences and the manifest: each bundled file's Debian package, its version and copyright file.
manifest_libs=""
for soname in $(printf '%s\n' "${!bundled[@]}" | sort); do
  src=$(readlink -f "${bundled[$soname]}")
  pkg=$(dpkg -S "$src" 2>/dev/null | head -n 1 | cut -d: -f1 || true)
  [ -n "$pkg" ] || pkg=$(dpkg -S "${bundled[$soname]}" 2>/dev/null | head -n 1 | cut -d: -f1 || true)
  pkgver=""
  if [ -n "$pkg" ]; then
    pkgver=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || true)
    [ -f "/usr/share/doc/$pkg/copyright" ] && cp "/usr/share/doc/$pkg/copyright" "$stage/share/kiln/licenses/$pkg.copyright"
  fi
  manifest_libs+="${manifest_libs:+,}
    {\"soname\": \"$soname\", \"from\": \"$src\", \"debian_package\": \"$pkg\", \"version\": \"$pkgver\"}"
done
cat > "$stage/share/kiln/licenses/NOTICE" <<EOF
kiln $version. The libraries in lib/ other than libkiln_cuda.so are unmodified copies of Debian 12
(bookworm) packages; each package's copyright and licence terms are in <package>.copyright here.
cuDNN, cuBLAS and the CUDA runtime are not included: install them from NVIDIA (or their Python
wheels) under NVIDIA's licences.
EOF
commit=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null | head -n 1)
doctor_json=$(mktemp)
"$stage/bin/kiln" doctor --json "$doctor_json" > /dev/null 2>&1 || true
python3 - "$doctor_json" "$stage/share/kiln/MANIFEST.json" "$version" "$commit" "${dirty:+dirty}" \
  "[${manifest_libs}
  ]" <<'PY'
import json, sys
doctor_path, out, version, commit, dirty, libs = sys.argv[1:7]
try:
    build = json.load(open(doctor_path)).get("build", {})
except (OSError, ValueError):
    build = {}
keep = ("kiln_version", "build_type", "compiler", "onednn_version", "cuda_enabled", "cuda_toolkit",
        "cudart_compiled", "cudart_linkage", "cudnn_compiled", "cublas_compiled",
        "cuda_architectures")
json.dump({"name": "kiln", "version": version, "git_commit": commit + ("-dirty" if dirty else ""),
           "platform": "linux-x86_64, glibc >= 2.36 (built on Debian 12)",
           "build": {k: build.get(k) for k in keep},
           "bundled_libraries": json.loads(libs),
           "not_bundled": ["libcuda.so.1 (NVIDIA driver)", "libcudnn.so.9 and its sub-libraries",
                           "libcublas.so.13, libcublasLt.so.13"]},
          open(out, "w"), indent=1)
PY
rm -f "$doctor_json"

mkdir -p "$out_dir"
tarball=$(cd "$out_dir" && pwd)/$name.tar.gz
tar -C "$stage_root" --owner=0 --group=0 --numeric-owner -czf "$tarball.tmp" "$name"
mv "$tarball.tmp" "$tarball"
echo "package.sh: ${#bundled[@]} libraries bundled: $(printf '%s ' "${!bundled[@]}" | tr ' ' '\n' | sort | tr '\n' ' ')"
echo "package.sh: $tarball ($(du -k "$tarball" | cut -f1) KiB compressed, $(du -sk "$stage" | cut -f1) KiB unpacked)"
