#!/usr/bin/env bash
# Builds the fuzzers (the `fuzz` preset: clang, libFuzzer, ASan + UBSan; only the layers they
# need) and runs the loader's for SECONDS (default 60) over a copy of tests/fuzz/corpus, then kiln
# serve's request parser (kiln_kserve_fuzz) for SECONDS/2 over a copy of tests/fuzz/kserve_corpus,
# so the tree is not changed. A crash, sanitizer report, leak, hang (10 s per input) or RSS over 2 GiB fails the run;
# the input that caused it is kept in build/fuzz/artifacts/ (add it to the corpus once fixed).
# usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
case $seconds in ''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, got '$seconds'" >&2; exit 2 ;; esac
command -v clang++ > /dev/null || { echo "fuzz.sh: clang++ not found (scripts/setup.sh installs it)" >&2; exit 1; }
cmake --preset fuzz > build-fuzz-configure.log 2>&1 || { cat build-fuzz-configure.log >&2; exit 1; }
ninja -C build/fuzz kiln_loader_fuzz kiln_kserve_fuzz > /dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp tests/fuzz/corpus/* "$work/"
mkdir -p build/fuzz/artifacts
set +e
ASAN_OPTIONS=detect_leaks=1 build/fuzz/tests/fuzz/kiln_loader_fuzz -max_total_time="$seconds" \
  -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$PWD/build/fuzz/artifacts/" "$work" > "$work.log" 2>&1
rc=$?
set -e
runs=$(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$work.log" | tail -n 1)
if [ $rc -eq 0 ]; then
  echo "loader fuzzer: ${runs:-no summary}; $(ls "$work" | wc -l) corpus entries; no crash"
  echo "1 passed, 0 failed"
else
  tail -n 40 "$work.log"
  echo "loader fuzzer FAILED (rc $rc); the input is in build/fuzz/artifacts/"
  echo "0 passed, 1 failed"
fi
rm -f "$work.log"
[ $rc -eq 0 ] || exit $rc

# kiln serve's request parser; the input that failed goes to the same artifacts folder.
kwork=$(mktemp -d)
trap 'rm -rf "$work" "$kwork"' EXIT
cp tests/fuzz/kserve_corpus/* "$kwork/"
set +e
ASAN_OPTIONS=detect_leaks=1 build/fuzz/tests/fuzz/kiln_kserve_fuzz -max_total_time=$((seconds / 2 + 1)) \
  -max_len=8192 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=256 -print_final_stats=1 \
  -artifact_prefix="$PWD/build/fuzz/artifacts/" "$kwork" > "$kwork.log" 2>&1
rc=$?
set -e
runs=$(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$kwork.log" | tail -n 1)
if [ $rc -eq 0 ]; then
  echo "kserve request fuzzer: ${runs:-no summary}; $(ls "$kwork" | wc -l) corpus entries; no crash"
  echo "1 passed, 0 failed"
else
  tail -n 40 "$kwork.log"
  echo "kserve request fuzzer FAILED (rc $rc); the input is in build/fuzz/artifacts/"
  echo "0 passed, 1 failed"
fi
rm -f "$kwork.log"
exit $rc
