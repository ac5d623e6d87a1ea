#!/usr/bin/env bash
# usage: cli_test.sh KILN_BINARY SOURCE_DIR
# Exercises `kiln inspect`, `kiln run`, `kiln bench`, `kiln doctor` and `kiln serve`: outputs, sanitised names,
# exit codes and messages for bad input. Prints "N passed, M failed"; exits 1 on any failure.
set -u
KILN=$1
SRC=$2
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
/usr/bin/python3 "$SRC/tests/cli/make_models.py" "$W" || { echo "cannot make test models"; exit 1; }

source "$SRC/tests/cli/check_lib.sh"

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
check unsupported-lists-both 13 "'det1' Normalizer \(ai.onnx.ml opset 3\)" -- "$KILN" run "$W/unsupported.onnx" --input "$W/a.npy" --output-dir "$W/o"
check run-repeat-zero 1 "--repeat: Value 0 not in range" -- "$KILN" run "$M" --input a="$W/a.npy" --input b="$W/b.npy" --output-dir "$W/o" --repeat 0
check run-repeat-steady 0 "steady run [0-9.]+ ms \(median of 2 runs after the first\)" -- "$KILN" run "$M" --input a="$W/a.npy" --input b="$W/b.npy" --output-dir "$W/o" --repeat 3
check run-disable-pass-unknown 11 "no pass is named 'fuse_nothing'; the passes are .*fuse_qconv_add" -- "$KILN" run "$M" --input a="$W/a.npy" --input b="$W/b.npy" --output-dir "$W/o" --disable-pass fuse_nothing
check bench-disable-pass 0 "pass fuse_conv_bn disabled \(--disable-pass\)" -- "$KILN" bench "$M" --shape a=2x3 --shape b=2x3 --warmup 1 --iterations 2 --disable-pass fuse_conv_bn
# --trace: Chrome/Perfetto trace JSON of every timed step (tests/cli/check_trace.py's rules).
D=$SRC/demo/fashion_mnist_cnn.onnx
check bench-trace 0 "trace: 3 runs, [0-9]+ steps each, written to" -- "$KILN" bench "$D" --batch 4 --warmup 1 --iterations 3 --trace "$W/bench_trace.json"
check bench-trace-valid 0 "^ok$" -- /usr/bin/python3 "$SRC/tests/cli/check_trace.py" "$W/bench_trace.json" 3
check bench-trace-sweep 11 "--profile and --trace take one --batch size" -- "$KILN" bench "$D" --batch 1,2 --trace "$W/x.json"
check run-trace 0 "trace: 2 runs written to" -- "$KILN" run "$M" --input a="$W/a.npy" --input b="$W/b.npy" --output-dir "$W/out3" --repeat 2 --trace "$W/run_trace.json"
check run-trace-valid 0 "^ok$" -- /usr/bin/python3 "$SRC/tests/cli/check_trace.py" "$W/run_trace.json" 2
check run-trace-unwritable 11 "cannot write --trace file" -- "$KILN" run "$M" --input a="$W/a.npy" --input b="$W/b.npy" --output-dir "$W/out3" --trace "$W/no/such/dir/t.json"
check inspect 0 "Add +1" -- "$KILN" inspect "$M"
check inspect-memory-plan 0 "memory plan: one arena of [0-9]+ bytes.*for a=\\[1,3\\]" -- "$KILN" inspect "$M"
check inspect-bad-shape 11 "--shape a=4xq: expected positive integer dims" -- "$KILN" inspect --optimized --shape a=4xq "$M"
check inspect-bad-precision 1 "--precision: fp16 not in" -- "$KILN" inspect --optimized --precision fp16 "$M"
check inspect-io 0 "a: float32\[N,3\]" -- "$KILN" inspect "$M"
check inspect-unsupported 0 "'nz1' Scaler \(ai.onnx.ml opset 3\)" -- "$KILN" inspect "$W/unsupported.onnx"
check inspect-optimized 0 "cpu.add.small" -- "$KILN" inspect --optimized --shape a=4x3 --shape b=4x3 "$M"
check inspect-optimized-large 0 "cpu.add.onednn" -- "$KILN" inspect --optimized --shape a=8192x3 --shape b=8192x3 "$M"
"$KILN" ops --markdown > "$W/matrix.md"
CUDA_BUILD=$("$KILN" doctor --json | /usr/bin/python3 -c 'import json,sys; print(int(json.load(sys.stdin)["build"]["cuda_enabled"]))')
# The committed matrix comes from a build with CUDA (its CUDA column, listed from the CUDA
# plugin); a CPU-only build skips this.
if [ "$CUDA_BUILD" = 1 ]; then
  check support-matrix-up-to-date 0 "" -- diff -u "$SRC/docs/support-matrix.md" "$W/matrix.md"
  # cuDNN and cuBLAS are the plugin's dependencies, never the program's.
  check no-cuda-libs-linked 0 "^ok$" -- bash -c "readelf -d '$KILN' | grep -Eq 'lib(cudnn|cublas)' && echo linked || echo ok"
  check cuda-plugin-next-to-kiln 0 "^ok$" -- bash -c "test -f '$(dirname "$KILN")/libkiln_cuda.so' && echo ok"
fi
check demo-model 0 "parameters: 206922" -- "$KILN" inspect "$SRC/demo/fashion_mnist_cnn.onnx"
D=$SRC/demo/fashion_mnist_cnn.onnx
check bench-ok 0 "latency over 3 timed runs" -- "$KILN" bench "$D" --iterations 3 --warmup 1 --json "$W/bench.json"
check bench-explains-first-run 0 "includes plan preparation" -- "$KILN" bench "$D" --iterations 1 --warmup 0
check bench-json-keys 0 "ok" -- /usr/bin/python3 -c "
import json
j = json.load(open('$W/bench.json'))
keys = ['load_ms', 'first_run_ms', 'latency_ms', 'throughput_per_s', 'model', 'batch', 'threads',
        'warmup', 'iterations', 'precision', 'kiln_version', 'onednn_version', 'cpu_model',
        'cpu_isa', 'rss_mb']
missing = [k for k in keys if k not in j]
assert not missing, missing
lat = j['latency_ms']
assert sorted(lat) == sorted(['min', 'p50', 'p90', 'p99', 'max', 'mean', 'std']), lat
assert 0 < lat['min'] <= lat['p50'] <= lat['p90'] <= lat['p99'] <= lat['max'], lat
assert j['batch'] == 1 and j['iterations'] == 3 and j['warmup'] == 1 and j['precision'] == 'fp32'
assert abs(j['throughput_per_s'] - 1000 / lat['mean']) < 1e-6 * j['throughput_per_s']
assert j['threads'] >= 1 and j['rss_mb'] > 0 and isinstance(j['cpu_isa'], list)
print('ok')"
# --profile: per-step times after the timed runs; every plan step listed once, kernels summed.
check bench-concurrency 0 "mean batch" -- "$KILN" bench "$D" --concurrency 1,4 --max-batch 4 --duration 0.3 --json "$W/conc.json"
check bench-concurrency-json 0 "^ok$" -- /usr/bin/python3 -c "
import json; j = json.load(open('$W/conc.json')); r = j['concurrency']
assert [x['concurrency'] for x in r] == [1, 4] and j['max_batch'] == 4, j
assert all(x['throughput_per_s'] > 0 and 1 <= x['mean_batch'] <= 4 for x in r), r
print('ok')"
# --overhead: pairs of direct and batched runs, both paths, with pair counts and medians.
check bench-overhead 0 "hand-off" -- "$KILN" bench "$D" --concurrency 1 --overhead --duration 0.3 --json "$W/ovh.json"
check bench-overhead-json 0 "^ok$" -- /usr/bin/python3 -c "
import json; o = json.load(open('$W/ovh.json'))['overhead']
assert set(o) == {'inline', 'hand-off'}, o
assert all(p['pairs'] > 0 and p['direct_p50_us'] > 0 and p['batcher_p50_us'] > 0 for p in o.values()), o
print('ok')"
check bench-overhead-needs-concurrency 1 "--overhead requires --concurrency" -- "$KILN" bench "$D" --overhead
check bench-max-batch-needs-concurrency 1 "--max-batch requires --concurrency" -- "$KILN" bench "$D" --max-batch 4
check bench-concurrency-zero 1 "--concurrency: Value 0 not in range" -- "$KILN" bench "$D" --concurrency 0
check bench-concurrency-one-batch 1 "takes one --batch" -- "$KILN" bench "$D" --concurrency 2 --batch 1,2
check bench-profile 0 "outside kernels" -- "$KILN" bench "$D" --iterations 3 --warmup 0 --profile --json "$W/profile.json"
check bench-profile-json 0 "^ok$" -- /usr/bin/python3 -c "
import json
j = json.load(open('$W/profile.json'))
p = j['profile']
assert p['runs'] == 3 and p['run_ms'] > 0, p
steps = p['steps']
assert len(steps) >= 5 and all(s['ms'] >= 0 and s['kernel'] for s in steps), steps
assert any(s['op_type'] == 'Conv' or s['op_type'] == 'kiln.FusedConv' for s in steps), steps
total = sum(s['ms'] for s in steps)
assert abs(sum(k['ms'] for k in p['by_kernel']) - total) < 1e-6 * max(total, 1), p['by_kernel']
assert sum(k['steps'] for k in p['by_kernel']) == len(steps)
assert total <= p['run_ms'] * 1.001, (total, p['run_ms'])
print('ok')"
check bench-batch-threads 0 "batch 4, threads 1" -- "$KILN" bench "$D" --batch 4 --threads 1 --iterations 2 --warmup 0
# --batch with several sizes: one session, a line per batch, what the session holds, JSON sweep[].
check bench-sweep 0 "session: 3 plans; packed weights" -- "$KILN" bench "$D" --batch 1,2,4 --iterations 2 --warmup 0 --json "$W/sweep.json"
check bench-sweep-json 0 '"batch": 4' -- cat "$W/sweep.json"
check bench-sweep-with-input 11 "generates its inputs; drop --input" -- "$KILN" bench "$D" --batch 1,2 --input "$W/none.npy"
check bench-sweep-with-profile 11 "--profile and --trace take one --batch size" -- "$KILN" bench "$D" --batch 1,2 --profile
check bench-sweep-bad-size 1 "" -- "$KILN" bench "$D" --batch 1,0
check bench-sweep-not-a-number 1 "" -- "$KILN" bench "$D" --batch 1,x
# The release and fuzz scripts refuse bad arguments with a message.
check package-bad-option 2 "unknown option '--frobnicate'" -- bash "$SRC/scripts/package.sh" --frobnicate
check gpu-check-bad-option 1 "unknown option '--frobnicate'" -- bash "$SRC/scripts/gpu_check.sh" --frobnicate
check gpu-check-no-kiln 1 "kiln not found" -- bash "$SRC/scripts/gpu_check.sh" --kiln /nonexistent/kiln
check fuzz-bad-seconds 2 "SECONDS must be a whole number" -- bash "$SRC/scripts/fuzz.sh" soon
check bench-json-stdout 0 "^ok$" -- bash -c "'$KILN' bench '$D' --iterations 2 --warmup 0 --json - 2>/dev/null | /usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); assert j[\"runtime\"]==\"kiln\"; print(\"ok\")'"
check bench-bad-shape 11 "--shape input=1x1x28: input 'input' is float32\[N,1,28,28\], rank 4, got rank 3" -- "$KILN" bench "$D" --shape input=1x1x28 --iterations 1
check bench-bad-shape-syntax 11 "expected positive integer dims" -- "$KILN" bench "$D" --shape input=1xax28x28 --iterations 1
check bench-shape-fixed-dim 11 "dim 1 of input 'input' is fixed to 1" -- "$KILN" bench "$D" --shape input=1x2x28x28 --iterations 1
check bench-unknown-shape-input 11 "unknown input 'foo'; the model's inputs are: input" -- "$KILN" bench "$D" --shape foo=1x2 --iterations 1
check bench-batch-zero 1 "--batch: Value 0 not in range" -- "$KILN" bench "$D" --batch 0
check bench-bad-precision 1 "--precision: fp8 not in" -- "$KILN" bench "$D" --precision fp8
check bench-fp16-on-cpu 11 "precision must be fp32 or bf16 on the CPU; got .fp16. \(fp16 runs on --device cuda\)" -- "$KILN" bench "$D" --precision fp16
check bench-symbolic-dim 11 "input 'x' \(float32\[N,3,H\]\): dim 2 \('H'\) is symbolic" -- "$KILN" bench "$W/sym.onnx"
check bench-symbolic-dim-shape 0 "input x: float32\[2,3,5\]" -- "$KILN" bench "$W/sym.onnx" --shape x=2x3x5 --iterations 1 --warmup 0
# --batch sizes inputs with a symbolic first dim only: a scalar or a fixed-first-dim input given
# with --input or --shape is not checked against it; a batched one still is.
check bench-batch-scalar-input 0 "batch 4" -- "$KILN" bench "$W/scalar.onnx" --batch 4 --input s="$W/s.npy" --input st="$W/st.npy" --iterations 1 --warmup 0
check bench-batch-fixed-dim-shape 0 "batch 4" -- "$KILN" bench "$W/scalar.onnx" --batch 4 --shape st=2x3 --iterations 1 --warmup 0
check bench-batch-input-disagrees 11 "--input x=.*a.npy is float32\[2,3\] but --batch is 4; make them agree" -- "$KILN" bench "$W/scalar.onnx" --batch 4 --input x="$W/a.npy" --iterations 1 --warmup 0
check bench-batch-shape-disagrees 11 "--shape x=2x3 has first dim 2 but --batch is 4" -- "$KILN" bench "$W/scalar.onnx" --batch 4 --shape x=2x3 --iterations 1 --warmup 0
check bench-missing-model 14 "cannot open model file" -- "$KILN" bench "$W/none.onnx"
check doctor-ok 0 "kiln doctor" -- "$KILN" doctor
check doctor-cpu-section 0 "oneDNN ISA" -- "$KILN" doctor
# Machines without an NVIDIA driver (CI) must hear so; doctor_test covers the driver paths.
if [ ! -e /dev/nvidiactl ] && ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
  check doctor-no-driver 0 "no NVIDIA driver found \(libcuda.so.1 not loadable\): GPU execution unavailable" -- "$KILN" doctor
  # Without a GPU the CUDA self-test must say nothing was checked (exit 3), and asking for the
  # cuda backend is a clear error: Unavailable (17) in a CUDA build, the same in a CPU-only one.
  check selftest-no-gpu 3 "NOTHING WAS CHECKED on backend 'cuda'" -- "$KILN" selftest
  check run-cuda-no-gpu 17 "(no CUDA device is visible|built without CUDA)" -- "$KILN" run "$M" --device cuda --input a="$W/a.npy" --input b="$W/b.npy" --output-dir "$W/cuda_out"
  check bench-cuda-no-gpu 17 "(no CUDA device is visible|built without CUDA)" -- "$KILN" bench "$D" --device cuda --iterations 1
fi
# The self-test harness itself, on the CPU's fast kernels against the reference kernels.
check selftest-cpu 0 "[0-9]+ passed, 0 failed" -- "$KILN" selftest --device cpu
check selftest-bad-device 1 "--device: tpu not in" -- "$KILN" selftest --device tpu
check selftest-missing-model 2 "FAIL  model $W/none.onnx: cannot open it" -- "$KILN" selftest --device cpu --no-models --model "$W/none.onnx"
check bench-bad-pinned 1 "--pinned: maybe not in" -- "$KILN" bench "$D" --pinned maybe
# --tune with a plan cache: the first bench measures and stores, the second reuses.
check bench-plan-cache-miss 0 "plan cache:  miss, stored [0-9]+ choices" -- "$KILN" bench "$D" --tune --plan-cache "$W/plans" --iterations 1 --warmup 0
check bench-plan-cache-hit 0 "plan cache:  hit \([0-9]+ choices reused\)" -- "$KILN" bench "$D" --tune --plan-cache "$W/plans" --iterations 1 --warmup 0
touch "$W/a-file"
check bench-plan-cache-unwritable 0 "plan cache:  miss; not stored: plan cache: cannot create" -- "$KILN" bench "$D" --tune --plan-cache "$W/a-file/plans" --iterations 1 --warmup 0
# Every registered kernel (CUDA ones included, in a CUDA build) has cases registered by its op.
if [ "$CUDA_BUILD" = 1 ]; then
  check selftest-coverage-cuda 0 "^0 registered cuda kernels have no case for their op \([1-9][0-9]+ registered\)" -- "$KILN" selftest --coverage
fi
check selftest-coverage-cpu 0 "^0 registered cpu kernels have no case for their op" -- "$KILN" selftest --coverage --device cpu
check doctor-json-stdout 0 "^ok$" -- bash -c "'$KILN' doctor --json | /usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); assert set(j)=={\"build\",\"cpu\",\"cuda\",\"warnings\"}; print(\"ok\")'"
# kiln serve: model discovery (a file, NAME.onnx files, Triton's NAME/VERSION/model.onnx), bad
# paths and duplicate names, then a served folder answering metadata, and SIGTERM exiting 0.
mkdir -p "$W/repo/twin/1" "$W/repo/twin/3" "$W/repo/twin/notaversion" "$W/empty"
cp "$M" "$W/repo/flat.onnx"
cp "$M" "$W/repo/twin/1/model.onnx"
cp "$M" "$W/repo/twin/3/model.onnx"
check serve-missing-path 14 "no model file or folder at .*nowhere" -- "$KILN" serve "$W/nowhere" --http-port 0 --grpc-port -1
check serve-empty-folder 14 "no .onnx model" -- "$KILN" serve "$W/empty" --http-port 0 --grpc-port -1
check serve-duplicate-name 11 "two models are named 'flat'" -- "$KILN" serve "$W/repo/flat.onnx" "$W/repo" --http-port 0 --grpc-port -1
check serve-bad-model 12 "while loading model 'bad'" -- "$KILN" serve "$W/bad.onnx" --http-port 0 --grpc-port -1
check serve-bad-port 1 "" -- "$KILN" serve "$M" --grpc-port 70000
"$KILN" serve "$W/repo" --host 127.0.0.1 --http-port 0 --grpc-port -1 --port-file "$W/ports" > "$W/serve.log" 2>&1 &
SERVE_PID=$!
for _ in $(seq 1 300); do [ -s "$W/ports" ] && grep -q "ready" "$W/serve.log" && break; sleep 0.1; done
HTTP_PORT=$(head -n 1 "$W/ports" 2>/dev/null)
check serve-repository 0 "^flat 1 twin 3$" -- /usr/bin/python3 -c "
import json, urllib.request
get = lambda p: json.load(urllib.request.urlopen('http://127.0.0.1:$HTTP_PORT' + p))
a, b = get('/v2/models/flat'), get('/v2/models/twin')
print(a['name'], a['versions'][0], b['name'], b['versions'][0])"
check serve-grpc-off 0 "^-1$" -- sed -n 2p "$W/ports"
# kiln bench --url against it, and its bad input.
check bench-url 0 "ok req/s" -- "$KILN" bench flat --url "http://127.0.0.1:$HTTP_PORT" --concurrency 2 --duration 0.5
check bench-url-rate 0 "rate/s" -- "$KILN" bench twin --url "http://127.0.0.1:$HTTP_PORT" --rate 20 --duration 0.5 --max-inflight 4
check bench-url-unknown-model 14 "unknown model 'nope'" -- "$KILN" bench nope --url "http://127.0.0.1:$HTTP_PORT" --concurrency 1 --duration 0.5
check bench-url-bad-url 11 "http://HOST:PORT or grpc://HOST:PORT" -- "$KILN" bench flat --url "ftp://127.0.0.1:1" --concurrency 1
check bench-url-unreachable 17 "cannot connect" -- "$KILN" bench flat --url "http://127.0.0.1:1" --concurrency 1
check bench-url-needs-mode 1 "needs one of --concurrency or --rate" -- "$KILN" bench flat --url "http://127.0.0.1:$HTTP_PORT"
check bench-rate-needs-url 1 "" -- "$KILN" bench "$M" --rate 10
check bench-url-bad-format 1 "" -- "$KILN" bench flat --url "http://127.0.0.1:$HTTP_PORT" --concurrency 1 --tensor-format xml
check serve-bad-instances 1 "" -- "$KILN" serve "$M" --instances 0
check serve-bad-queue-timeout 1 "" -- "$KILN" serve "$M" --queue-timeout-us -1
check serve-bad-compute-nice 1 "compute-nice: Value 20 not in range 0 to 19" -- "$KILN" serve "$M" --compute-nice 20
kill -TERM "$SERVE_PID"
wait "$SERVE_PID"
SERVE_RC=$?
check serve-sigterm-exit-0 0 "" -- test "$SERVE_RC" -eq 0
check serve-drain-report 0 "drained in .* 0 unfinished" -- cat "$W/serve.log"
# kiln quantize on the demo CNN: calibration from a tensor file and from image folders (corrupt
# images skipped and reported, an empty folder refused before any work), the cache, refusals.
/usr/bin/python3 -c "import numpy as np; np.save('$W/calib.npy', np.random.default_rng(0).standard_normal((40, 1, 28, 28), dtype=np.float32))"
check quantize-npy 0 "quantized 2 nodes to int8 \(percentile, 40 samples" -- "$KILN" quantize "$D" --calibrate "$W/calib.npy" --out "$W/q.onnx" --cache "$W/qc.json"
check quantize-output-runs 0 "kiln.QConv" -- "$KILN" inspect "$W/q.onnx" --optimized
check quantize-qdq-input 11 "nothing to quantize.*is not an initializer" -- "$KILN" quantize "$W/q.onnx" --calibrate "$W/calib.npy" --out "$W/qq.onnx"
check quantize-cache-hit 0 "ranges read, no calibration" -- "$KILN" quantize "$D" --calibrate "$W/calib.npy" --out "$W/q2.onnx" --cache "$W/qc.json"
check quantize-cache-same-model 0 "" -- cmp "$W/q.onnx" "$W/q2.onnx"
check quantize-cache-other-method 11 "made for another method" -- "$KILN" quantize "$D" --calibrate "$W/calib.npy" --out "$W/q3.onnx" --cache "$W/qc.json" --method minmax
/usr/bin/python3 -c "import onnx; m = onnx.load('$D'); m.producer_name = 'another'; onnx.save(m, '$W/other.onnx')"
check quantize-cache-other-model 11 "made for another model_hash" -- "$KILN" quantize "$W/other.onnx" --calibrate "$W/calib.npy" --out "$W/q3.onnx" --cache "$W/qc.json"
# Per-channel scales on depthwise convolutions' inputs (the MobileNetV2-style net): fused into
# its int8 depthwise convolutions; a cache made with them is refused without them.
check quantize-channel-activations 0 "per-channel activation scales: 7 depthwise convolution inputs" -- "$KILN" quantize "$SRC/demo/fmnist_mobilenetv2.onnx" --calibrate "$W/calib.npy" --out "$W/qch.onnx" --channel-activations --cache "$W/qch.json"
check quantize-channel-activations-fused 0 "7 depthwise with per-channel input scales folded" -- "$KILN" inspect "$W/qch.onnx" --optimized
check quantize-channel-activations-cache 11 "made for another channel_activations: the cache has \"depthwise\", this run null" -- "$KILN" quantize "$SRC/demo/fmnist_mobilenetv2.onnx" --calibrate "$W/calib.npy" --out "$W/qch2.onnx" --cache "$W/qch.json"
/usr/bin/python3 -c "import json, sys; d = json.load(open(sys.argv[1])); [t.pop('channel_thresholds', None) for t in d['tensors'].values()]; json.dump(d, open(sys.argv[2], 'w'))" "$W/qch.json" "$W/qch_bad.json"
check quantize-channel-activations-cache-damaged 11 "qch_bad.json': tensor '.*channel_thresholds' not found" -- "$KILN" quantize "$SRC/demo/fmnist_mobilenetv2.onnx" --calibrate "$W/calib.npy" --out "$W/qch3.onnx" --channel-activations --cache "$W/qch_bad.json"
check quantize-trt-table 0 "TRT-8600-EntropyCalibration2" -- sh -c "'$KILN' quantize '$D' --calibrate '$W/calib.npy' --out '$W/q4.onnx' --method minmax --trt-cache '$W/trt.txt' > /dev/null && cat '$W/trt.txt'"
check quantize-all-kept-float 11 "nothing to quantize.*--keep-float Conv" -- "$KILN" quantize "$D" --calibrate "$W/calib.npy" --out "$W/q5.onnx" --keep-float Conv --keep-float Gemm
check quantize-no-data 14 "does not exist" -- "$KILN" quantize "$D" --calibrate "$W/none.npy" --out "$W/q6.onnx"
check quantize-auto 0 "auto: thresholds kept per tensor:.* quantized models tried on 32 samples; output error" -- "$KILN" quantize "$D" --calibrate "$W/calib.npy" --method auto --quantize-all --out "$W/qa.onnx"
check quantize-bad-method 11 "unknown calibration method 'kl'" -- "$KILN" quantize "$D" --calibrate "$W/calib.npy" --out "$W/q7.onnx" --method kl
/usr/bin/python3 -c "import numpy as np; np.save('$W/calib_labels.npy', np.random.default_rng(0).integers(0, 10, 40))"
check quantize-max-drop 0 "accuracy control: within 100.00 pt" -- "$KILN" quantize "$D" --calibrate "$W/calib.npy" --samples 20 --labels "$W/calib_labels.npy" --max-drop 100 --out "$W/qm.onnx"
check quantize-max-drop-negative 1 "" -- "$KILN" quantize "$D" --calibrate "$W/calib.npy" --max-drop -0.5 --out "$W/qm2.onnx"
check quantize-max-drop-no-held-out 11 "has 40 rows, all used" -- "$KILN" quantize "$D" --calibrate "$W/calib.npy" --max-drop 1 --out "$W/qm3.onnx"
# Without labels accuracy control compares argmax with float32. One huge calibration value ruins
# the minmax ranges, so int8 disagrees; the search keeps the most sensitive nodes float.
/usr/bin/python3 -c "import numpy as np; x = np.random.default_rng(0).standard_normal((40, 1, 28, 28), dtype=np.float32); x[3, 0, 5, 5] = 3e4; np.save('$W/outlier.npy', x)"
check quantize-max-drop-agreement 0 "accuracy control: [1-3] nodes kept float, drop" -- "$KILN" quantize "$D" --calibrate "$W/outlier.npy" --samples 20 --method minmax --quantize-all --max-drop 25 --out "$W/qm8.onnx"
check quantize-max-drop-not-reached 11 "not reached: it would keep every node float" -- "$KILN" quantize "$D" --calibrate "$W/outlier.npy" --samples 20 --method minmax --quantize-all --max-drop 0 --out "$W/qm9.onnx"
/usr/bin/python3 -c "import numpy as np; np.save('$W/short_labels.npy', np.zeros(7, dtype=np.int64)); np.save('$W/float_labels.npy', np.zeros(40, dtype=np.float32))"
check quantize-max-drop-labels-count 11 "one int64/int32 class per sample \(40\); got int64\[7\]" -- "$KILN" quantize "$D" --calibrate "$W/calib.npy" --samples 20 --labels "$W/short_labels.npy" --max-drop 1 --out "$W/qm5.onnx"
check quantize-max-drop-labels-dtype 11 "got float32\[40\]" -- "$KILN" quantize "$D" --calibrate "$W/calib.npy" --samples 20 --labels "$W/float_labels.npy" --max-drop 1 --out "$W/qm6.onnx"
check quantize-max-drop-labels-missing 14 "" -- "$KILN" quantize "$D" --calibrate "$W/calib.npy" --samples 20 --labels "$W/none_labels.npy" --max-drop 1 --out "$W/qm7.onnx"
check quantize-max-drop-needs-held-out 11 "all used" -- "$KILN" quantize "$D" --calibrate "$W/calib.npy" --labels "$W/calib_labels.npy" --max-drop 1 --out "$W/qm4.onnx"
mkdir -p "$W/imgs" "$W/noimgs"
/usr/bin/python3 -c "
import numpy as np, zlib, struct, sys
def png(path, a):
    raw = b''.join(b'\\x00' + bytes(r) for r in a)
    def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))
    open(path, 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 28, 28, 8, 0, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))
rng = np.random.default_rng(1)
for i in range(6): png(f'$W/imgs/{i}.png', rng.integers(0, 256, (28, 28), dtype=np.uint8))
"
printf 'not an image' > "$W/imgs/broken.png"
# A two-input model: one tensor file per input, NAME=FILE.
T=$W/two_convs.onnx
check quantize-multi-input 0 "quantized 3 nodes to int8 \(percentile, 10 samples" -- "$KILN" quantize "$T" --calibrate a="$W/ca.npy" --calibrate b="$W/cb.npy" --quantize-all --out "$W/qt.onnx" --cache "$W/qt.json"
check quantize-multi-input-runs 0 "kiln.QConv +2" -- "$KILN" inspect "$W/qt.onnx" --optimized --shape a=2x3x8x8 --shape b=2x3x8x8
check quantize-multi-input-cache 0 "ranges read, no calibration" -- "$KILN" quantize "$T" --calibrate b="$W/cb.npy" --calibrate a="$W/ca.npy" --quantize-all --out "$W/qt2.onnx" --cache "$W/qt.json"
check quantize-multi-input-cache-other-data 11 "made for another calibration_data" -- "$KILN" quantize "$T" --calibrate a="$W/cb.npy" --calibrate b="$W/ca.npy" --quantize-all --out "$W/qt3.onnx" --cache "$W/qt.json"
check quantize-multi-input-report 0 "report: float32 vs int8 on calibration samples" -- "$KILN" quantize "$T" --calibrate a="$W/ca.npy" --calibrate b="$W/cb.npy" --quantize-all --out "$W/qt4.onnx" --report
check quantize-multi-input-one-file 13 "needs a one-input model; .* has 2 inputs \(a, b\): give each as --calibrate NAME=FILE" -- "$KILN" quantize "$T" --calibrate "$W/ca.npy" --quantize-all --out "$W/qt5.onnx"
check quantize-multi-input-missing 11 "input 'b' is given 0 times" -- "$KILN" quantize "$T" --calibrate a="$W/ca.npy" --quantize-all --out "$W/qt6.onnx"
check quantize-multi-input-twice 11 "input 'a' is given 2 times" -- "$KILN" quantize "$T" --calibrate a="$W/ca.npy" --calibrate a="$W/ca.npy" --calibrate b="$W/cb.npy" --quantize-all --out "$W/qt7.onnx"
check quantize-multi-input-unknown 11 "c=.*names no input of the model" -- "$KILN" quantize "$T" --calibrate a="$W/ca.npy" --calibrate c="$W/cb.npy" --quantize-all --out "$W/qt8.onnx"
check quantize-multi-input-counts 11 "holds 7 samples and .* 10; every input needs as many" -- "$KILN" quantize "$T" --calibrate a="$W/ca.npy" --calibrate b="$W/cb7.npy" --quantize-all --out "$W/qt9.onnx"
check quantize-multi-input-missing-file 14 "calibration data '.*none.npy' does not exist" -- "$KILN" quantize "$T" --calibrate a="$W/ca.npy" --calibrate b="$W/none.npy" --quantize-all --out "$W/qt10.onnx"
check quantize-multi-input-max-drop 11 "held-out samples of a one-input model" -- "$KILN" quantize "$T" --calibrate a="$W/ca.npy" --calibrate b="$W/cb.npy" --samples 5 --max-drop 1 --quantize-all --out "$W/qt11.onnx"
check quantize-images 0 "1 of 7 calibration images could not be read" -- "$KILN" quantize "$D" --calibrate "$W/imgs" --recipe fashion-mnist --out "$W/q8.onnx"
check quantize-bad-recipe 11 "recipe" -- "$KILN" quantize "$D" --calibrate "$W/imgs" --recipe no-such-recipe --out "$W/qm8.onnx"
check quantize-images-empty 11 "no .jpg, .jpeg or .png files found" -- "$KILN" quantize "$D" --calibrate "$W/noimgs" --recipe fashion-mnist --out "$W/q9.onnx"
check quantize-images-empty-no-output 1 "" -- test -f "$W/q9.onnx"
for sub in run inspect bench doctor selftest serve quantize; do
  check "help-$sub" 0 "Usage" -- "$KILN" "$sub" --help
done
check help-top 0 "inspect" -- "$KILN" --help
check no-subcommand 1 "subcommand" -- "$KILN"
check bad-flag 1 "" -- "$KILN" run "$M" --frobnicate

echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
