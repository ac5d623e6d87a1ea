#!/usr/bin/env bash
# Builds the fuzzers (the `fuzz` preset: clang, libFuzzer, ASan + UBSan; only the layers they
# need) and runs the loader's for SECONDS (default 60) over a copy of tests/fuzz/corpus, the
# session's (kiln_session_fuzz: load, passes, planning, a small run) for SECONDS over the same
# corpus, then kiln serve's request parser (kiln_kserve_fuzz), the body of its repository load
# request (kiln_load_request_fuzz) and the .npy/.pb tensor-file parsers
# (kiln_tensor_file_fuzz), the image decoders with a recipe's transform (kiln_image_fuzz) and
# recipe JSON (kiln_recipe_fuzz), and the records files --resume reads (kiln_records_fuzz) and the
# labels files (kiln_labels_fuzz) of image jobs for SECONDS/2 each over copies of
# tests/fuzz/<name>_corpus, so the tree is not changed. First, the sanitizer canary shows that a
# UBSan finding stops a program of this build. A crash, sanitizer report, leak, hang (10 s per input) or RSS over 2 GiB fails the run;
# the input that caused it is kept in build/fuzz/artifacts/ (add it to the corpus once fixed).
# Then (or alone, with `python`) the Python API's argument conversion for SECONDS/2 under atheris
# (tests/fuzz/python_args_fuzz.py, over a copy of tests/fuzz/python_args_corpus) against the
# package a build assembled: $KILN_PYTHON_PKG, default build/release/python. It runs in the pinned
# fuzz venv (tests/pyenv/check_venv.py FUZZ_PINS); a package index it cannot reach to make that
# venv, or no package built, is a skip (tests/skip.sh: a failure under CI). The extension is the
# release build's: not coverage-instrumented and without ASan, so the fuzzer is guided by the
# Python side and finds C++ memory errors only when they crash.
# usage: scripts/fuzz.sh [SECONDS] [all|native|python]   (default: 60 all)
# Long campaigns: KILN_FUZZ_RUNS=N runs each native target for N inputs instead of a time (the
# Python target keeps SECONDS/2); KILN_FUZZ_TARGETS="kiln_kserve_fuzz ..." runs only those native
# targets; KILN_FUZZ_SKIP_BUILD=1 uses the fuzz build as it is (for two campaigns side by side);
# KILN_FUZZ_WORKERS=N runs N processes of each native target over one corpus (libFuzzer reloads
# what the others add, every second), each for SECONDS or KILN_FUZZ_RUNS/N inputs (and the ones
# it reloads: the sum can pass KILN_FUZZ_RUNS); the inputs reported are their sum;
# KILN_FUZZ_CORPUS_DIR=DIR fuzzes over DIR/<target> (made from the tree's
# corpus the first time) and keeps it, so that a campaign can go on in pieces (the inputs of a
# piece are its own; a campaign's total is the sum of its pieces').
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
what=${2:-all}
case $seconds in ''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, got '$seconds'" >&2; exit 2 ;; esac
case ${KILN_FUZZ_WORKERS:-1} in ''|0|*[!0-9]*) echo "fuzz.sh: KILN_FUZZ_WORKERS must be a positive whole number, got '$KILN_FUZZ_WORKERS'" >&2; exit 2 ;; esac
case ${KILN_FUZZ_RUNS:-1} in ''|*[!0-9]*) echo "fuzz.sh: KILN_FUZZ_RUNS must be a whole number, got '$KILN_FUZZ_RUNS'" >&2; exit 2 ;; esac
case $what in all|native|python) ;; *) echo "fuzz.sh: expected all, native or python, got '$what'" >&2; exit 2 ;; esac
mkdir -p build/fuzz/artifacts
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run_python_fuzzer SECONDS: the Python API fuzzer (exit 77: skipped, with the reason printed; a
# finding exits 1, not libFuzzer's default 77, which CTest would count as a skip).
run_python_fuzzer() {
  local secs=$1 pkg=${KILN_PYTHON_PKG:-build/release/python} py rc=0 runs
  # shellcheck source=../tests/skip.sh
  source tests/skip.sh
  [ -f "$pkg/kiln/__init__.py" ] || kiln_skip "python argument fuzzer: no kiln package at" \
    "$pkg (scripts/build.sh builds it; KILN_PYTHON_PKG names another)"
  py=$(/usr/bin/python3 tests/pyenv/check_venv.py fuzz-python) || { rc=$?; echo "$py"; return $rc; }
  mkdir -p "$work/python_args"
  cp tests/fuzz/python_args_corpus/* "$work/python_args/"
  set +e
  PYTHONPATH=$pkg PYTHONDONTWRITEBYTECODE=1 "$py" tests/fuzz/python_args_fuzz.py \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=2048 -print_final_stats=1 \
    -error_exitcode=1 \
    -artifact_prefix="$PWD/build/fuzz/artifacts/python_args-" "$work/python_args" \
    > "$work/python_args.log" 2>&1
  rc=$?
  set -e
  runs=$(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$work/python_args.log" | tail -n 1 || true)
  if [ $rc -eq 0 ]; then
    echo "python argument fuzzer: ${runs:-no summary}; $(ls "$work/python_args" | wc -l) corpus" \
      "entries; no finding"
    echo "1 passed, 0 failed"
  else
    tail -n 60 "$work/python_args.log"
    echo "python argument fuzzer FAILED (rc $rc); the input is in build/fuzz/artifacts/"
    echo "0 passed, 1 failed"
  fi
  return $rc
}

if [ "$what" = python ]; then
  run_python_fuzzer $((seconds / 2 + 1))
  exit $?
fi
command -v clang++ > /dev/null || { echo "fuzz.sh: clang++ not found (scripts/setup.sh installs it)" >&2; exit 1; }
if [ "${KILN_FUZZ_SKIP_BUILD:-0}" != 1 ]; then
cmake --preset fuzz > build-fuzz-configure.log 2>&1 || { cat build-fuzz-configure.log >&2; exit 1; }
ninja -C build/fuzz kiln_loader_fuzz kiln_session_fuzz kiln_kserve_fuzz kiln_tensor_file_fuzz \
  kiln_image_fuzz kiln_recipe_fuzz kiln_records_fuzz kiln_labels_fuzz kiln_load_request_fuzz \
  kiln_sanitizer_canary \
  > /dev/null
fi

# First, that a sanitizer finding stops a program of this build by its flags alone
# (-fno-sanitize-recover; UBSan would otherwise print and go on): the canary's signed overflow.
canary_rc=0
canary=$(env -u UBSAN_OPTIONS -u ASAN_OPTIONS build/fuzz/tests/fuzz/kiln_sanitizer_canary ubsan 2>&1) \
  || canary_rc=$?
if [ $canary_rc -eq 0 ] || ! grep -q "runtime error" <<< "$canary"; then
  echo "fuzz.sh: a UBSan finding does not stop the program (rc $canary_rc): $canary" >&2
  echo "0 passed, 1 failed"
  exit 1
fi
echo "sanitizer canary: a UBSan report stops the program (rc $canary_rc)"

# run_fuzzer LABEL TARGET CORPUS SECONDS [LIBFUZZER FLAGS...]: over a copy of CORPUS; a failing
# input goes to build/fuzz/artifacts/. Returns the fuzzer's exit code.
run_fuzzer() {
  local label=$1 target=$2 corpus=$3 secs=$4 rc=0 runs limit w workers=${KILN_FUZZ_WORKERS:-1}
  local pids=() p
  shift 4
  if [ -n "${KILN_FUZZ_TARGETS:-}" ] && [[ " $KILN_FUZZ_TARGETS " != *" $target "* ]]; then
    return 0
  fi
  limit=-max_total_time="$secs"
  [ -z "${KILN_FUZZ_RUNS:-}" ] || limit=-runs=$(((KILN_FUZZ_RUNS + workers - 1) / workers))
  # A fresh copy of the tree's corpus, or the kept one of an earlier piece.
  local dir=${KILN_FUZZ_CORPUS_DIR:-$work}/$target
  if [ ! -d "$dir" ]; then
    mkdir -p "$dir" 2> /dev/null || { echo "fuzz.sh: cannot make the corpus folder $dir" >&2; exit 2; }
    cp "$corpus"/* "$dir/"
  fi
  set +e
  for ((w = 0; w < workers; w++)); do
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      "build/fuzz/tests/fuzz/$target" "$limit" \
      -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "$@" \
      -artifact_prefix="$PWD/build/fuzz/artifacts/" "$dir" > "$work/$target.$w.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do
    wait "$p"
    w=$?
    [ $rc -ne 0 ] || rc=$w
  done
  set -e
  # "Done N runs in S seconds" per worker: the sum of N, the longest S.
  runs=$(cat "$work/$target".*.log | grep -oE 'Done [0-9]+ runs in [0-9]+ second' |
    awk '{n += $2; if ($5 > s) s = $5} END {if (NR) printf "Done %d runs in %d second(s)", n, s}' ||
    true)
  [ "$workers" -eq 1 ] || runs="$runs ($workers processes)"
  if [ $rc -eq 0 ]; then
    echo "$label: ${runs:-no summary}; $(ls "$dir" | wc -l) corpus entries; no crash"
    echo "1 passed, 0 failed"
  else
    for ((w = 0; w < workers; w++)); do tail -n 40 "$work/$target.$w.log"; done
    echo "$label FAILED (rc $rc); the input is in build/fuzz/artifacts/"
    echo "0 passed, 1 failed"
  fi
  return $rc
}

run_fuzzer "loader fuzzer" kiln_loader_fuzz tests/fuzz/corpus "$seconds" -max_len=4096
# The same models through a whole session: passes, planning, kernel preparation, a small run.
run_fuzzer "session fuzzer" kiln_session_fuzz tests/fuzz/corpus "$seconds" -max_len=4096
# kiln serve's request parser, with an allocation limit: no request may make it allocate more
# than its body could hold.
run_fuzzer "kserve request fuzzer" kiln_kserve_fuzz tests/fuzz/kserve_corpus \
  $((seconds / 2 + 1)) -max_len=8192 -malloc_limit_mb=256
# The .npy and TensorProto .pb files users pass as inputs and calibration data, with the same
# allocation limit: a header may not make the parser allocate more than the file holds.
# The body of the repository API's load/unload request (Triton's; kiln takes no config in it).
run_fuzzer "load request fuzzer" kiln_load_request_fuzz tests/fuzz/load_request_corpus \
  $((seconds / 2 + 1)) -max_len=2048 -malloc_limit_mb=256
run_fuzzer "tensor file fuzzer" kiln_tensor_file_fuzz tests/fuzz/tensor_corpus \
  $((seconds / 2 + 1)) -max_len=4096 -malloc_limit_mb=256
# Image files through libjpeg-turbo/libpng and a recipe's transform (16-megapixel cap), and recipe
# JSON with its round trip and transform.
run_fuzzer "image fuzzer" kiln_image_fuzz tests/fuzz/image_corpus \
  $((seconds / 2 + 1)) -max_len=8192 -malloc_limit_mb=1024
run_fuzzer "recipe fuzzer" kiln_recipe_fuzz tests/fuzz/recipe_corpus \
  $((seconds / 2 + 1)) -max_len=2048 -malloc_limit_mb=512
# The records files of `kiln run --images` (JSON Lines and CSV) as --resume reads them back, with a
# written record resumed; and labels files, as text and through the file.
run_fuzzer "records fuzzer" kiln_records_fuzz tests/fuzz/records_corpus \
  $((seconds / 2 + 1)) -max_len=4096 -malloc_limit_mb=256
run_fuzzer "labels fuzzer" kiln_labels_fuzz tests/fuzz/labels_corpus \
  $((seconds / 2 + 1)) -max_len=4096 -malloc_limit_mb=256
if [ "$what" = all ]; then
  # In a subshell: a skip (exit 77) ends only this part.
  python_rc=0
  (run_python_fuzzer $((seconds / 2 + 1))) || python_rc=$?
  [ $python_rc -eq 0 ] || [ $python_rc -eq 77 ] || exit $python_rc
fi
