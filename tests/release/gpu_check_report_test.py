#!/usr/bin/env python3
"""gpu_check_torch.py's report on synthetic kiln and PyTorch results: rows matched by model, batch,
precision and graph mode, ratios in the stated direction (batch 1: kiln p50 / PyTorch p50; larger:
kiln items/s / PyTorch items/s), verdicts from the return codes, a missing PyTorch row left without
a ratio. Also the script's CPU path (`bench --device cpu`) when Debian's torch is importable.
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
    return {"model": f"/x/{model}.onnx", "batch": batch, "precision": precision,
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
    print("SKIP export/bench: torch and torchvision not importable")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
