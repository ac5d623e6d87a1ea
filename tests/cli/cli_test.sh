#!/usr/bin/env bash
# usage: cli_test.sh KILN_BINARY SOURCE_DIR
# Exercises `kiln inspect` and `kiln run`: outputs, sanitised names, exit codes and messages for
# bad input. Prints "N passed, M failed"; exits 1 on any failure.
set -u
KILN=$1
SRC=$2
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
/usr/bin/python3 "$SRC/tests/cli/make_models.py" "$W" || { echo "cannot make test models"; exit 1; }

passed=0; failed=0
# check NAME EXPECTED_RC GREP_PATTERN -- command...
check() {
  local name=$1 want_rc=$2 pattern=$3; shift 4
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -eq "$want_rc" ] && grep -qE -- "$pattern" <<< "$out"; then
    passed=$((passed + 1)); echo "PASS $name"
  else
    failed=$((failed + 1)); echo "FAIL $name: rc=$rc (want $want_rc), pattern '$pattern' in:"; echo "$out" | sed 's/^/    /'
  fi
}

M=$W/two_inputs.onnx
check run-ok 0 "sum:0/x: float32\[2,3\]" -- "$KILN" run "$M" --input a="$W/a.npy" --input b="$W/b.npy" --output-dir "$W/out"
check run-sanitised-file 0 "" -- test -f "$W/out/sum_0_x.npy"
check run-values 0 "ok" -- /usr/bin/python3 -c "import numpy as np; y=np.load('$W/out/sum_0_x.npy'); assert y.dtype==np.float32 and (y==np.arange(6).reshape(2,3)+1).all(); print('ok')"
check run-pb-input 0 "sum:0/x" -- "$KILN" run "$M" --input a="$W/a.npy" --input b="$W/b.pb" --output-dir "$W/out2"
check missing-input 11 "missing input 'b'.*float32\[N,3\]" -- "$KILN" run "$M" --input a="$W/a.npy" --output-dir "$W/o"
check unknown-input 11 "unknown input 'c'" -- "$KILN" run "$M" --input a="$W/a.npy" --input c="$W/b.npy" --output-dir "$W/o"
check wrong-dtype 11 "input 'b': wrong dtype; expected float32\[N,3\], got int64\[2,3\]" -- "$KILN" run "$M" --input a="$W/a.npy" --input b="$W/b_int.npy" --output-dir "$W/o"
check wrong-rank 11 "input 'b': wrong rank; expected float32\[N,3\], got float32\[6\]" -- "$KILN" run "$M" --input a="$W/a.npy" --input b="$W/b_rank.npy" --output-dir "$W/o"
check unnamed-input-needs-name 11 "has 2 inputs, so name it" -- "$KILN" run "$M" --input "$W/a.npy" --output-dir "$W/o"
check missing-file 14 "cannot read.*nope.npy" -- "$KILN" run "$M" --input a="$W/a.npy" --input b="$W/nope.npy" --output-dir "$W/o"
check missing-file-names-input 14 "while reading input 'b'" -- "$KILN" run "$M" --input a="$W/a.npy" --input b="$W/nope.npy" --output-dir "$W/o"
printf 'garbage' > "$W/bad.npy"
check malformed-file 11 "not a .npy file" -- "$KILN" run "$M" --input a="$W/a.npy" --input b="$W/bad.npy" --output-dir "$W/o"
check bad-extension 11 "expected .npy or .pb" -- "$KILN" run "$M" --input a="$W/a.npy" --input b="$W/a.txt" --output-dir "$W/o"
check missing-model 14 "cannot open model file" -- "$KILN" run "$W/none.onnx" --input "$W/a.npy" --output-dir "$W/o"
printf 'not a model' > "$W/bad.onnx"
check malformed-model 12 "not a valid ONNX model" -- "$KILN" run "$W/bad.onnx" --input "$W/a.npy" --output-dir "$W/o"
check unsupported-run 13 "2 unsupported nodes.*" -- "$KILN" run "$W/unsupported.onnx" --input "$W/a.npy" --output-dir "$W/o"
check unsupported-lists-both 13 "'det1' Det \(ai.onnx opset 13\)" -- "$KILN" run "$W/unsupported.onnx" --input "$W/a.npy" --output-dir "$W/o"
check inspect 0 "Add +1" -- "$KILN" inspect "$M"
check inspect-io 0 "a: float32\[N,3\]" -- "$KILN" inspect "$M"
check inspect-unsupported 0 "'nz1' NonZero \(ai.onnx opset 13\)" -- "$KILN" inspect "$W/unsupported.onnx"
check inspect-optimized 0 "cpu.add.ref" -- "$KILN" inspect --optimized --shape a=4x3 --shape b=4x3 "$M"
check demo-model 0 "parameters: 206922" -- "$KILN" inspect "$SRC/demo/fashion_mnist_cnn.onnx"
for sub in run inspect; do
  check "help-$sub" 0 "Usage" -- "$KILN" "$sub" --help
done
check help-top 0 "inspect" -- "$KILN" --help
check no-subcommand 1 "subcommand" -- "$KILN"
check bad-flag 1 "" -- "$KILN" run "$M" --frobnicate

echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
