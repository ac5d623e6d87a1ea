#!/usr/bin/env python3
"""gpu_check_torch.py's report on synthetic kiln and PyTorch results: rows matched by model, batch,
precision and graph mode, ratios in the stated direction (batch 1: kiln p50 / PyTorch p50; larger:
kiln items/s / PyTorch items/s), verdicts from the return codes, a missing PyTorch row left without
a ratio. Also the script's CPU path (`bench --device cpu`) with Debian's torch, and gpu_check.sh's
exit status with a fake kiln and a fake GPU test program: only checks that ran count as a pass.
usage: gpu_check_report_test.py REPO"""
import json
import os
import subprocess
import sys
import tempfile

repo = sys.argv[1]
script = os.path.join(repo, "scripts", "gpu_check_torch.py")
passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"PASS {name}")
    else:
        failed += 1
        print(f"FAIL {name} {detail}")


def kiln(model, batch, precision, graph, pinned, p50, per_s):
    return {"runtime": "kiln", "model": f"/x/{model}.onnx", "batch": batch, "precision": precision,
            "cuda_graph": graph, "pinned": pinned, "device_name": "Fake GPU",
            "latency_ms": {"p50": p50}, "throughput_per_s": per_s, "load_ms": 10.0,
            "first_run_ms": 5.0}


def torch_row(model, batch, precision, mode, p50):
    return {"runtime": "pytorch", "model": model, "batch": batch, "precision": precision,
            "mode": mode, "latency_ms": {"p50": p50}, "throughput_per_s": batch * 1000.0 / p50,
            "device_only_ms_p50": p50 / 2}


with tempfile.TemporaryDirectory() as out:
    os.makedirs(os.path.join(out, "logs"))
    rows = [kiln("resnet50", 1, "fp32", False, True, 2.0, 500.0),
            kiln("resnet50", 1, "fp32", True, True, 1.0, 1000.0),
            kiln("resnet50", 32, "fp16", False, False, 20.0, 1600.0),
            kiln("mobilenet_v2", 1, "fp32", False, True, 1.0, 1000.0)]
    for i, r in enumerate(rows):
        with open(os.path.join(out, "logs", f"kiln_{i}.json"), "w") as f:
            json.dump(r, f)
    # The GPU test program's gtest JSON lies beside them (logs/kiln_cuda_device_test.json): the
    # report must pass over it, as it failed to on the first H200 run.
    with open(os.path.join(out, "logs", "kiln_cuda_device_test.json"), "w") as f:
        json.dump({"tests": 5, "failures": 0, "testsuites": []}, f)
    with open(os.path.join(out, "logs", "torch_resnet50.json"), "w") as f:
        for t in [torch_row("resnet50", 1, "fp32", "eager", 4.0),
                  torch_row("resnet50", 1, "fp32", "cuda_graph", 0.5),
                  torch_row("resnet50", 32, "fp16", "eager", 40.0)]:
            f.write(json.dumps(t) + "\n")
    r = subprocess.run([sys.executable, script, "report", out, "--elapsed", "12", "--rc",
                        "selftest_fp32=0", "--rc", "selftest_fp16=2", "--rc", "gpu_tests=3"],
                       capture_output=True, text=True)
    check("report exits 0", r.returncode == 0, r.stderr)
    doc = json.load(open(os.path.join(out, "report.json")))
    by = {(x["model"], x["batch"], x["precision"], x["cuda_graph"]): x for x in doc["rows"]}
    check("batch 1 eager ratio = kiln p50 / torch eager p50", abs(by[("resnet50", 1, "fp32", False)]["ratio"] - 0.5) < 1e-9)
    check("batch 1 graph ratio against torch's graph replay", abs(by[("resnet50", 1, "fp32", True)]["ratio"] - 2.0) < 1e-9)
    check("batch 32 ratio = kiln items/s / torch items/s", abs(by[("resnet50", 32, "fp16", False)]["ratio"] - 2.0) < 1e-9)
    check("no torch row: no ratio", by[("mobilenet_v2", 1, "fp32", False)]["ratio"] is None)
    check("verdicts", doc["verdicts"] == {"selftest_fp32": "pass", "selftest_fp16": "FAIL",
                                          "gpu_tests": "nothing checked"}, doc["verdicts"])
    check("device named", doc["device"] == "Fake GPU")
    check("text report lists the failure", "selftest cuda fp16     FAIL" in r.stdout, r.stdout)

try:
    import torch  # noqa: F401
    import torchvision  # noqa: F401
    have_torch = True
except ImportError:
    have_torch = False
if have_torch:
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([sys.executable, script, "export", d, "mobilenet_v2"],
                           capture_output=True, text=True)
        check("export writes mobilenet_v2.onnx", r.returncode == 0 and
              os.path.getsize(os.path.join(d, "mobilenet_v2.onnx")) > 1e6, r.stderr[-2000:])
        r = subprocess.run([sys.executable, script, "bench", d, "mobilenet_v2", "--batches", "1",
                            "--quick", "--device", "cpu"], capture_output=True, text=True)
        lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
        check("bench --device cpu: one eager fp32 row with a positive p50",
              r.returncode == 0 and len(lines) == 1 and lines[0]["mode"] == "eager" and
              lines[0]["latency_ms"]["p50"] > 0, r.stderr[-2000:])
else:
    # scripts/setup.sh installs Debian's torch and torchvision: without them this part is unchecked.
    check("torch and torchvision importable (scripts/setup.sh installs them)", False)

# gpu_check.sh's verdicts, with a fake kiln and a fake GPU test program in a fake release prefix:
# the doctor says a GPU is usable, and the check may pass only when cases really ran.
FAKE_KILN = r"""#!/usr/bin/env bash
cmd=$1; shift
case $cmd in
  doctor)
    if [ "${1:-}" = --json ]; then
      printf '{"cuda": {"execution_available": %s}}\n' "${FAKE_GPU:-true}" > "$2"
    else
      echo "  GPU 0: Fake GPU"
    fi ;;
  selftest)
    if [ "$FAKE_SELFTEST" = zero ]; then echo "0 passed, 0 failed; 0 of 40 registered cuda kernels exercised"
    else echo "12 passed, 0 failed; 30 of 40 registered cuda kernels exercised"; fi ;;
  bench)
    while [ $# -gt 0 ]; do [ "$1" = --json ] && json=$2; shift; done
    printf '{"model": "/x/demo.onnx", "batch": 1, "precision": "fp32", "cuda_graph": false, "pinned": true, "device_name": "Fake GPU", "latency_ms": {"p50": 1.0}, "throughput_per_s": 1000.0}\n' > "$json"
    echo "latency p50 1.0 ms" ;;
esac
exit 0
"""
FAKE_TEST = {
    "ok": "echo '[       OK ] CudaDeviceTest.DeviceOpens (1 ms)'; echo '[       OK ] CudaDeviceTest.Fp32MatchesReference (2 ms)'",
    "skip": "echo '[  SKIPPED ] CudaDeviceTest.DeviceOpens (0 ms)'; echo '[  SKIPPED ] CudaDeviceTest.Fp32MatchesReference (0 ms)'",
}


def gpu_check(test_mode, selftest="ok", gpu="true"):
    with tempfile.TemporaryDirectory() as prefix:
        os.makedirs(os.path.join(prefix, "bin"))
        kiln_path = os.path.join(prefix, "bin", "kiln")
        with open(kiln_path, "w") as f:
            f.write(FAKE_KILN)
        os.chmod(kiln_path, 0o755)
        if test_mode is not None:
            tests = os.path.join(prefix, "libexec", "kiln", "tests")
            os.makedirs(tests)
            with open(os.path.join(tests, "kiln_cuda_device_test"), "w") as f:
                f.write("#!/usr/bin/env bash\n" + FAKE_TEST[test_mode] + "\nexit 0\n")
            os.chmod(os.path.join(tests, "kiln_cuda_device_test"), 0o755)
        env = dict(os.environ, FAKE_SELFTEST=selftest, FAKE_GPU=gpu)
        return subprocess.run(["bash", os.path.join(repo, "scripts", "gpu_check.sh"), "--kiln",
                               kiln_path, "--quick", "--no-torch", "--out",
                               os.path.join(prefix, "out")],
                              capture_output=True, text=True, env=env, timeout=120)


r = gpu_check("ok")
check("gpu_check.sh: everything ran and passed: exit 0", r.returncode == 0 and
      "checks ran and passed" in r.stdout, r.stdout[-1500:] + r.stderr[-500:])
r = gpu_check(None)
check("gpu_check.sh: the GPU test program missing: exit 2, not a pass", r.returncode == 2 and
      "FAILED: gpu_tests" in r.stdout, r.stdout[-1500:])
r = gpu_check("skip")
check("gpu_check.sh: GPU tests that skip on a usable GPU: exit 2, not a pass",
      r.returncode == 2 and "FAILED: gpu_tests" in r.stdout, r.stdout[-1500:])
r = gpu_check("ok", selftest="zero")
check("gpu_check.sh: a selftest that ran no case: exit 2, not a pass",
      r.returncode == 2 and "FAILED: selftest_fp32" in r.stdout, r.stdout[-1500:])
r = gpu_check("ok", gpu="false")
check("gpu_check.sh: no usable GPU: nothing checked (3)", r.returncode == 3 and
      "NOTHING CHECKED" in r.stdout, r.stdout[-1500:])

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
