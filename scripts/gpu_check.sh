#!/usr/bin/env bash
# Proves kiln's CUDA backend on the machine it runs on, from an unpacked release and no network.
#
# usage: gpu_check.sh [--out DIR] [--kiln PATH] [--quick]
#
# Steps (each recorded in DIR/report.json and DIR/report.txt, logs beside them):
#  1. `kiln doctor` (text and JSON). No usable GPU (doctor's cuda.execution_available false): says
#     why and exits 3 -- selftest's "nothing checked" code -- within seconds.
#  2. `kiln selftest --device cuda`, at fp32 and at fp16.
#  3. The gpu-labelled tests (libexec/kiln/tests/*, or build/release/tests/ in a build tree).
#  4. Models: ResNet-50 and MobileNetV2 exported with this machine's PyTorch (seeded random weights,
#     the legacy TorchScript exporter at opset 17; dynamo at opset 18 when that exporter is gone),
#     or, without torch, the demo model shipped in share/kiln/demo.
#  5. `kiln bench --device cuda` on each model at batch 1 and 32, fp32 and fp16, --cuda-graph off
#     and on, --pinned on and off; and PyTorch's own CUDA execution of the same models (eager and
#     CUDA-graph replay, fp32 and fp16 via .half(); timed from host memory to host memory with a
#     pinned input, as kiln bench times, and on-device only for reference), alternating kiln and
#     PyTorch by model. Ratios are kiln p50 / PyTorch p50 at batch 1 and kiln throughput /
#     PyTorch throughput at batch 32.
#  6. The report: verdicts (doctor, selftest fp32/fp16, gpu tests, bench) and the ratio table.
# --quick: batch 1 only, fewer iterations (a smoke run). --no-torch: the demo model only, no
# PyTorch export or ratios.
#
# Exit status: 0 everything checked passed; 2 a check failed (selftest, gpu tests, a bench run), and
# with a usable GPU a missing test program, a skipped GPU test or a selftest that ran no case is a
# failure too; 3 nothing was checked (no GPU, no CUDA plugin, a CPU-only kiln, or no check ran);
# 1 bad usage or set-up error.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=""
kiln=""
quick=0
no_torch=0
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --kiln) kiln=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --no-torch) no_torch=1; shift ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown option '$1' (see --help)" >&2; exit 1 ;;
  esac
done

# The release layout (share/kiln/scripts/gpu_check.sh) or the source tree (scripts/gpu_check.sh).
if [ -z "$kiln" ]; then
  for c in "$here/../../../bin/kiln" "$here/../build/release/tools/kiln/kiln"; do
    [ -x "$c" ] && { kiln=$(cd "$(dirname "$c")" && pwd)/kiln; break; }
  done
fi
[ -n "$kiln" ] && [ -x "$kiln" ] || { echo "gpu_check.sh: kiln not found; pass --kiln PATH" >&2; exit 1; }
prefix=$(cd "$(dirname "$kiln")/.." && pwd)
tests_dir=""
for c in "$prefix/libexec/kiln/tests" "$prefix/../tests"; do
  [ -d "$c" ] && { tests_dir=$(cd "$c" && pwd); break; }
done
demo_model=""
for c in "$prefix/share/kiln/demo/fashion_mnist_cnn.onnx" "$here/../demo/fashion_mnist_cnn.onnx"; do
  [ -f "$c" ] && { demo_model=$c; break; }
done
[ -n "$out" ] || out=$(pwd)/gpu_check_$(date +%Y%m%d-%H%M%S)
mkdir -p "$out/logs" || { echo "gpu_check.sh: cannot create $out" >&2; exit 1; }
out=$(cd "$out" && pwd)
log() { echo "[gpu_check $(date +%H:%M:%S)] $*" | tee -a "$out/logs/progress.log"; }
start_s=$(date +%s)

# 1. doctor
log "kiln: $kiln"
"$kiln" doctor > "$out/doctor.txt" 2>&1
doctor_rc=$?
"$kiln" doctor --json "$out/doctor.json" > /dev/null 2>&1
available=$(grep -o '"execution_available": *[a-z]*' "$out/doctor.json" 2>/dev/null | grep -o '[a-z]*$')
if [ "$available" != "true" ]; then
  why=$(grep -E '^WARNING' "$out/doctor.txt" | head -n 3)
  {
    echo "gpu_check: NOTHING CHECKED: kiln cannot run on a GPU here (doctor rc $doctor_rc)."
    echo "${why:-$(tail -n 5 "$out/doctor.txt")}"
  } | tee "$out/report.txt"
  printf '{"verdict": "nothing_checked", "doctor_rc": %d, "reason": "cuda.execution_available is not true"}\n' \
    "$doctor_rc" > "$out/report.json"
  exit 3
fi
log "doctor: $(grep -m1 -E '^  GPU 0' "$out/doctor.txt" | sed 's/^ *//')"

# 2. selftest at fp32 and fp16: a pass needs rc 0 and at least one case passed ("N passed, M failed")
declare -A rc=()
checked=0
for p in fp32 fp16; do
  "$kiln" selftest --device cuda --precision "$p" > "$out/logs/selftest_$p.txt" 2>&1
  r=$?
  n=$(grep -oE '^[0-9]+ passed, [0-9]+ failed' "$out/logs/selftest_$p.txt" | tail -n 1 | cut -d' ' -f1)
  if [ $r -eq 0 ] && [ "${n:-0}" -gt 0 ]; then
    rc[selftest_$p]=0; checked=$((checked + n))
  else
    rc[selftest_$p]=2  # a failure, or rc 0 with no case run (the doctor said the GPU is usable)
  fi
  log "selftest cuda $p: rc $r, ${n:-no} cases passed: $(tail -n 1 "$out/logs/selftest_$p.txt")"
done

# 3. gpu-labelled tests: the program must be there and its tests must run. The doctor said the
# GPU is usable, so a missing program, a skipped test or no test run is a failure, not a pass.
gpu_tests_rc=2
t=${tests_dir:+$tests_dir/kiln_cuda_device_test}
if [ -z "$t" ] || [ ! -x "$t" ]; then
  log "kiln_cuda_device_test not found (looked in $prefix/libexec/kiln/tests and $prefix/../tests): FAIL"
else
  "$t" --gtest_output="json:$out/logs/$(basename "$t").json" > "$out/logs/$(basename "$t").txt" 2>&1
  r=$?
  ran=$(grep -cE '^\[       OK \]' "$out/logs/$(basename "$t").txt")
  skipped=$(grep -cE '^\[  SKIPPED \]' "$out/logs/$(basename "$t").txt")
  [ $r -eq 0 ] && [ "$ran" -gt 0 ] && [ "$skipped" -eq 0 ] && gpu_tests_rc=0
  checked=$((checked + ran))
  log "$(basename "$t"): rc $r, $ran ran and passed, $skipped skipped: $([ $gpu_tests_rc = 0 ] && echo pass || echo FAIL)"
fi
rc[gpu_tests]=$gpu_tests_rc

# 4. models
python=""
[ $no_torch = 1 ] || for c in python3 /usr/bin/python3; do
  if command -v "$c" > /dev/null && "$c" -c "import torch, torchvision" 2> /dev/null; then
    python=$c; break
  fi
done
models_dir=$out/models
mkdir -p "$models_dir"
models=()
if [ -n "$python" ]; then
  if "$python" "$here/gpu_check_torch.py" export "$models_dir" resnet50,mobilenet_v2 \
       > "$out/logs/export.txt" 2>&1; then
    models=(resnet50 mobilenet_v2)
  else
    log "export failed (see logs/export.txt); falling back to the demo model"
  fi
else
  log "no importable torch+torchvision: kiln alone on the demo model, no PyTorch ratios"
fi
if [ ${#models[@]} -eq 0 ] && [ -n "$demo_model" ]; then
  cp "$demo_model" "$models_dir/demo.onnx"
  models=(demo)
fi

# 5. bench: kiln over every combination, then PyTorch, model by model (alternating the runtimes)
batches="1 32"
b1_iters="--warmup 20 --iterations 100"
bn_iters="--warmup 5 --iterations 30"
if [ $quick = 1 ]; then batches="1"; b1_iters="--warmup 5 --iterations 20"; fi
bench_failed=0
for m in "${models[@]}"; do
  for b in $batches; do
    iters=$b1_iters; [ "$b" != 1 ] && iters=$bn_iters
    for p in fp32 fp16; do
      for g in off on; do
        for pin in on off; do
          tag=${m}_b${b}_${p}_graph-${g}_pinned-${pin}
          flags=(); [ $g = on ] && flags+=(--cuda-graph)
          # shellcheck disable=SC2086
          "$kiln" bench "$models_dir/$m.onnx" --device cuda --batch "$b" --precision "$p" \
            --pinned "$pin" "${flags[@]}" $iters --json "$out/logs/kiln_$tag.json" \
            > "$out/logs/kiln_$tag.txt" 2>&1
          r=$?
          if [ $r -ne 0 ]; then bench_failed=1; else checked=$((checked + 1)); fi
          log "kiln bench $tag: rc $r $(grep -m1 -E 'p50' "$out/logs/kiln_$tag.txt" | sed 's/^ *//')"
        done
      done
    done
  done
  if [ -n "$python" ] && [ "$m" != demo ]; then
    "$python" "$here/gpu_check_torch.py" bench "$models_dir" "$m" --batches "${batches// /,}" \
      $([ $quick = 1 ] && echo --quick) > "$out/logs/torch_$m.json" 2> "$out/logs/torch_$m.err"
    log "pytorch $m: rc $? ($(wc -l < "$out/logs/torch_$m.json") result lines)"
  fi
done
rc[bench]=$((bench_failed ? 2 : 0))

# 6. report
elapsed=$(( $(date +%s) - start_s ))
report_py=$here/gpu_check_torch.py
py=${python:-$(command -v python3 || echo /usr/bin/python3)}
"$py" "$report_py" report "$out" --elapsed "$elapsed" --rc "selftest_fp32=${rc[selftest_fp32]}" \
  --rc "selftest_fp16=${rc[selftest_fp16]}" --rc "gpu_tests=${rc[gpu_tests]}" \
  --rc "bench=${rc[bench]}" --rc "doctor=$doctor_rc" > "$out/report.txt" 2> "$out/logs/report.err" \
  || echo "report generation failed: $(cat "$out/logs/report.err")" >> "$out/report.txt"
cat "$out/report.txt"
echo "gpu_check: $checked checks ran and passed (selftest cases, GPU tests, bench runs)"
for k in selftest_fp32 selftest_fp16 gpu_tests bench; do
  [ "${rc[$k]}" -ne 0 ] && { echo "gpu_check: FAILED: $k"; exit 2; }
done
if [ "$checked" -eq 0 ]; then
  echo "gpu_check: NOTHING CHECKED: no selftest case, GPU test or bench run passed"
  exit 3
fi
exit 0
