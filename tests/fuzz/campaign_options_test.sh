#!/usr/bin/env bash
# scripts/fuzz.sh's options for long campaigns, on the labels target of the fuzz build that
# loader_fuzz made: KILN_FUZZ_WORKERS=2 runs two processes whose inputs add up to KILN_FUZZ_RUNS,
# KILN_FUZZ_CORPUS_DIR keeps the corpus (seeded from the tree's the first time) for the next
# piece, a worker that stops fails the target with its log shown, and a worker count that is not
# a positive number or a corpus folder that cannot be made is refused.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
piece() {
  KILN_FUZZ_SKIP_BUILD=1 KILN_FUZZ_TARGETS=kiln_labels_fuzz KILN_FUZZ_WORKERS=2 \
    KILN_FUZZ_RUNS=3000 KILN_FUZZ_CORPUS_DIR="$dir" bash scripts/fuzz.sh 2 native 2>&1
}
[ -x build/fuzz/tests/fuzz/kiln_labels_fuzz ] || fail "no fuzz build (loader_fuzz builds it)"
seeds=$(ls tests/fuzz/labels_corpus | wc -l)
out=$(piece) || { echo "$out"; fail "the first piece failed"; }
echo "$out"
# At least 3000: a process also runs the inputs it reloads from the other's finds.
runs=$(sed -nE 's/^labels fuzzer: Done ([0-9]+) runs in [0-9]+ second\(s\) \(2 processes\).*/\1/p' <<< "$out")
[ -n "$runs" ] && [ "$runs" -ge 3000 ] || fail "expected at least 3000 inputs from 2 processes"
first=$(ls "$dir/kiln_labels_fuzz" | wc -l)
[ "$first" -gt "$seeds" ] || fail "the corpus kept has $first entries, the seeds $seeds"
out=$(piece) || { echo "$out"; fail "the second piece failed"; }
second=$(ls "$dir/kiln_labels_fuzz" | wc -l)
[ "$second" -ge "$first" ] || fail "the second piece did not start from the first's corpus"
grep -q "; $second corpus entries; no crash" <<< "$out" || fail "the second piece's corpus: $out"
# A worker that stops with a finding (here: interrupted, libFuzzer's exit code 72) fails the
# target, and its log is shown, though it printed no summary line.
KILN_FUZZ_SKIP_BUILD=1 KILN_FUZZ_TARGETS=kiln_labels_fuzz KILN_FUZZ_WORKERS=2 \
  KILN_FUZZ_CORPUS_DIR="$dir" bash scripts/fuzz.sh 40 native > "$dir/stopped.log" 2>&1 &
pid=$!
sleep 3
pkill -INT -f "kiln_labels_fuzz .*$dir/kiln_labels_fuzz" || true
rc=0
wait $pid || rc=$?
[ $rc -eq 72 ] && grep -q 'labels fuzzer FAILED (rc 72)' "$dir/stopped.log" &&
  grep -q 'run interrupted' "$dir/stopped.log" || fail "an interrupted worker: rc $rc, $(cat "$dir/stopped.log")"
rc=0
KILN_FUZZ_WORKERS=0 bash scripts/fuzz.sh 2 native > "$dir/bad.log" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q 'KILN_FUZZ_WORKERS must be a positive whole number' "$dir/bad.log" ||
  fail "KILN_FUZZ_WORKERS=0: rc $rc, $(cat "$dir/bad.log")"
rc=0
KILN_FUZZ_SKIP_BUILD=1 KILN_FUZZ_TARGETS=kiln_labels_fuzz KILN_FUZZ_CORPUS_DIR=/proc/kiln \
  bash scripts/fuzz.sh 2 native > "$dir/nodir.log" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "cannot make the corpus folder /proc/kiln/kiln_labels_fuzz" "$dir/nodir.log" ||
  fail "KILN_FUZZ_CORPUS_DIR that cannot be made: rc $rc, $(cat "$dir/nodir.log")"
echo "campaign options: $seeds seeds, $first entries after one piece, $second after two"
echo "1 passed, 0 failed"
