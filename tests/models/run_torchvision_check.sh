#!/bin/bash
# Check kiln against PyTorch on torchvision models (seeded random weights).
#
# usage: tests/models/run_torchvision_check.sh KILN_BINARY WORKDIR
#
# Runs make_torchvision_refs.py into WORKDIR (cheap when the files already exist), then for each
# model/opset/batch runs
#   KILN_BINARY run WORKDIR/<model>_op<opset>.onnx --input WORKDIR/<model>_b<B>_input.npy \
#       --output-dir WORKDIR/out_<model>_op<opset>_b<B>
# and compares WORKDIR/out_<model>_op<opset>_b<B>/logits.npy with WORKDIR/<model>_b<B>_logits.npy.
# Prints one line per case and a final line "N passed, M failed"; exits 1 on any failure
# (2 on a usage error or when the references cannot be made).
#
# Environment overrides: MODELS (comma list), OPSETS (default 13,17), BATCHES (default 1,4),
# RTOL (1e-3), ATOL (1e-4), PYTHON (/usr/bin/python3), KILN_TIMEOUT (seconds per run, 600),
# CALIBRATE_BN (1).
set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 KILN_BINARY WORKDIR" >&2
    exit 2
fi
KILN=$1
WORKDIR=$2
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
MODELS=${MODELS:-resnet18,resnet50,mobilenet_v2,efficientnet_b0,convnext_tiny}
OPSETS=${OPSETS:-13,17}
BATCHES=${BATCHES:-1,4}
RTOL=${RTOL:-1e-3}
ATOL=${ATOL:-1e-4}
KILN_TIMEOUT=${KILN_TIMEOUT:-600}
# 1 (default): BatchNorm statistics measured on random inputs (make_torchvision_refs.py
# calibrate_bn: realistic activation scales); 0: the shared exporter's raw random statistics.
# Use a separate WORKDIR for each setting: existing files are reused.
CALIBRATE_BN=${CALIBRATE_BN:-1}

if ! command -v "$KILN" > /dev/null 2>&1 || [ -d "$KILN" ]; then
    echo "error: kiln binary '$KILN' not found or not executable" >&2
    exit 2
fi
mkdir -p "$WORKDIR" || exit 2

echo "== making references in $WORKDIR"
CAL_FLAG=()
if [ "$CALIBRATE_BN" = 1 ]; then CAL_FLAG=(--calibrate-bn); fi
if ! "$PYTHON" "$HERE/make_torchvision_refs.py" "$WORKDIR" --models "$MODELS" \
        --opsets "$OPSETS" --batches "$BATCHES" "${CAL_FLAG[@]}"; then
    echo "error: make_torchvision_refs.py failed" >&2
    exit 2
fi

passed=0
failed=0
IFS=, read -r -a model_list <<< "$MODELS"
IFS=, read -r -a opset_list <<< "$OPSETS"
IFS=, read -r -a batch_list <<< "$BATCHES"
for model in "${model_list[@]}"; do
    for opset in "${opset_list[@]}"; do
        for b in "${batch_list[@]}"; do
            case_name="${model}_op${opset}_b${b}"
            out="$WORKDIR/out_${case_name}"
            log="$WORKDIR/out_${case_name}.log"
            rm -rf "$out"
            mkdir -p "$out"
            start=$(date +%s.%N)
            timeout "$KILN_TIMEOUT" "$KILN" run "$WORKDIR/${model}_op${opset}.onnx" \
                --input "$WORKDIR/${model}_b${b}_input.npy" --output-dir "$out" > "$log" 2>&1
            rc=$?
            secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
            if [ $rc -ne 0 ]; then
                failed=$((failed + 1))
                last=$(tail -n 1 "$log")
                echo "FAIL $case_name: kiln exited $rc after ${secs}s: ${last:-(no output)} (log: $log)"
                continue
            fi
            if [ ! -f "$out/logits.npy" ]; then
                failed=$((failed + 1))
                echo "FAIL $case_name: no $out/logits.npy (${secs}s)"
                continue
            fi
            if msg=$("$PYTHON" "$HERE/compare_npy.py" "$out/logits.npy" \
                    "$WORKDIR/${model}_b${b}_logits.npy" --rtol "$RTOL" --atol "$ATOL" 2>&1); then
                passed=$((passed + 1))
                echo "PASS $case_name (${secs}s): ${msg#OK: }"
            else
                failed=$((failed + 1))
                echo "FAIL $case_name (${secs}s): ${msg#FAIL: }"
            fi
        done
    done
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
