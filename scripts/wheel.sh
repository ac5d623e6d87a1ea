#!/usr/bin/env bash
# Makes kiln's self-contained wheel: dist/kiln-<version>-cp311-cp311-linux_x86_64.whl (for the
# Python the build used), carrying libkiln.so and every non-system library on $ORIGIN run paths
# as the release tarball does (scripts/wheel.py says what goes where).
#
# usage: scripts/wheel.sh [--build-dir DIR] [--no-build] [--out-dir DIR]
# Prints the wheel's path and size last.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=build/release
out_dir=dist
do_build=1
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build_dir=$2; shift 2 ;;
    --out-dir) out_dir=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "wheel.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$do_build" = 1 ]; then bash scripts/build.sh > /dev/null; fi
[ -d "$build_dir/python/kiln" ] || { echo "wheel.sh: $build_dir/python/kiln not found: the build has no Python package (scripts/build.sh needs the pinned nanobind)" >&2; exit 1; }
version=$(sed -n 's/^project(kiln VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash scripts/package.sh --no-build --build-dir "$build_dir" --out-dir "$work" > "$work/package.log" 2>&1 \
  || { cat "$work/package.log" >&2; exit 1; }
tar -C "$work" -xzf "$work/kiln-$version-linux-x86_64.tar.gz"
/usr/bin/python3 scripts/wheel.py "$build_dir/python/kiln" "$work/kiln-$version-linux-x86_64/lib" \
  "$out_dir" "$version"
