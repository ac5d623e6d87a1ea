#!/usr/bin/env python3
"""PyTorch side of gpu_check.sh, and its report.

  gpu_check_torch.py export DIR MODELS         torchvision MODELS (comma-separated) -> DIR/<m>.onnx
  gpu_check_torch.py bench DIR MODEL [--batches 1,32] [--quick]
                                               PyTorch CUDA timings, one JSON line per case
  gpu_check_torch.py report OUT [--elapsed S] [--rc name=code ...]
                                               OUT/report.json and the text report on stdout

export and bench need torch and torchvision (the machine's own); report needs only the standard
library. Weights are seeded random values (no pretrained weights can be fetched offline): every
parameter and BatchNorm statistic is drawn from a seeded generator, so no layer is an identity.
Input "input" [N,3,224,224] with a dynamic batch, output "logits".
"""
import argparse
import glob
import json
import os
import statistics
import sys
import time


def build_model(name):
    import torch
    import torchvision.models as tvm
    torch.manual_seed(0)
    model = getattr(tvm, name)(weights=None).eval()
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
                mod.running_mean.normal_(0.0, 0.1, generator=gen)
                mod.running_var.uniform_(0.5, 1.5, generator=gen)
                mod.weight.uniform_(0.5, 1.5, generator=gen)
                mod.bias.normal_(0.0, 0.1, generator=gen)
    return model


def export(outdir, names):
    import torch
    os.makedirs(outdir, exist_ok=True)
    for name in names:
        model = build_model(name)
        x = torch.rand(1, 3, 224, 224)
        path = os.path.join(outdir, f"{name}.onnx")
        kwargs = dict(input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
        try:  # the legacy TorchScript exporter at opset 17 (kiln runs opsets up to 17)
            torch.onnx.export(model, (x,), path, opset_version=17, dynamo=False, **kwargs)
            how = "torchscript exporter, opset 17"
        except TypeError:  # a torch without the dynamo argument: the legacy exporter is the default
            torch.onnx.export(model, (x,), path, opset_version=17, **kwargs)
            how = "torchscript exporter, opset 17"
        print(f"{name}: {path} ({how}, torch {torch.__version__})", flush=True)


def bench(model_dir, name, batches, quick, device="cuda"):
    import torch
    dev = torch.device(device)
    cuda = dev.type == "cuda"
    torch.backends.cudnn.benchmark = True
    for precision in ("fp32", "fp16") if cuda else ("fp32",):  # CPU: a check of this script
        model = build_model(name).to(dev)
        if precision == "fp16":
            model = model.half()
        for batch in batches:
            warm, iters = (5, 20) if quick else ((20, 100) if batch == 1 else (5, 30))
            host_in = torch.rand(batch, 3, 224, 224, generator=torch.Generator().manual_seed(1))
            host_out = torch.empty(batch, 1000)
            if cuda:
                host_in, host_out = host_in.pin_memory(), host_out.pin_memory()
            dev_in = torch.empty(batch, 3, 224, 224, device=dev)

            def step():
                dev_in.copy_(host_in, non_blocking=True)
                x = dev_in.half() if precision == "fp16" else dev_in
                y = model(x)
                return y

            with torch.inference_mode():
                for mode in ("eager", "cuda_graph") if cuda else ("eager",):
                    if mode == "eager":
                        run_dev = step
                    else:
                        s = torch.cuda.Stream()
                        s.wait_stream(torch.cuda.current_stream())
                        with torch.cuda.stream(s):
                            for _ in range(3):
                                step()
                        torch.cuda.current_stream().wait_stream(s)
                        graph = torch.cuda.CUDAGraph()
                        with torch.cuda.graph(graph):
                            static_out = step()

                        def run_dev(graph=graph, static_out=static_out):
                            graph.replay()
                            return static_out
                    for _ in range(warm):
                        run_dev()
                    sync = torch.cuda.synchronize if cuda else (lambda: None)
                    sync()
                    host_ms, dev_ms = [], []
                    for _ in range(iters):  # host memory to host memory, as kiln bench times
                        t0 = time.perf_counter()
                        y = run_dev()
                        host_out.copy_(y.float(), non_blocking=True)
                        sync()
                        host_ms.append((time.perf_counter() - t0) * 1e3)
                    for _ in range(iters if cuda else 0):  # on the device only
                        start = torch.cuda.Event(enable_timing=True)
                        end = torch.cuda.Event(enable_timing=True)
                        start.record()
                        run_dev()
                        end.record()
                        end.synchronize()
                        dev_ms.append(start.elapsed_time(end))
                    p50 = statistics.median(host_ms)
                    print(json.dumps({
                        "runtime": "pytorch", "version": torch.__version__, "model": name,
                        "batch": batch, "precision": precision, "mode": mode,
                        "device_name": torch.cuda.get_device_name(0) if cuda else "cpu",
                        "latency_ms": {"p50": p50, "min": min(host_ms),
                                       "p99": sorted(host_ms)[max(0, int(len(host_ms) * 0.99) - 1)]},
                        "throughput_per_s": batch * 1000.0 / p50,
                        "device_only_ms_p50": statistics.median(dev_ms) if dev_ms else None,
                        "iterations": iters}), flush=True)
        del model


def report(out, elapsed, rcs):
    rc = {}
    for item in rcs:
        k, _, v = item.partition("=")
        rc[k] = int(v)
    kiln = []
    for path in sorted(glob.glob(os.path.join(out, "logs", "kiln_*.json"))):
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(r, dict) and r.get("runtime") == "kiln":  # not the GPU tests' gtest JSON
            kiln.append(r)
    torch_rows = []
    for path in sorted(glob.glob(os.path.join(out, "logs", "torch_*.json"))):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    torch_rows.append(json.loads(line))

    def model_of(r):
        return os.path.splitext(os.path.basename(r.get("model", "")))[0]

    def metric(r):
        return r["latency_ms"]["p50"] if r["batch"] == 1 else r["throughput_per_s"]

    rows = []
    for k in kiln:
        t = {r["mode"]: r for r in torch_rows if r["model"] == model_of(k) and
             r["batch"] == k["batch"] and r["precision"] == k["precision"]}
        ref = t.get("cuda_graph" if k.get("cuda_graph") else "eager")
        row = {"model": model_of(k), "batch": k["batch"], "precision": k["precision"],
               "cuda_graph": bool(k.get("cuda_graph")), "pinned": bool(k.get("pinned")),
               "kiln_p50_ms": k["latency_ms"]["p50"], "kiln_per_s": k["throughput_per_s"],
               "kiln_split_ms": k.get("device_split_ms_p50"),
               "kiln_first_run_ms": k.get("first_run_ms"), "kiln_load_ms": k.get("load_ms"),
               "cold_start": k.get("cold_start"),
               "torch_mode": ref["mode"] if ref else None,
               "torch_p50_ms": ref["latency_ms"]["p50"] if ref else None,
               "torch_per_s": ref["throughput_per_s"] if ref else None,
               "torch_device_only_ms": ref["device_only_ms_p50"] if ref else None}
        row["ratio"] = metric(k) / metric(ref) if ref and metric(ref) > 0 else None
        rows.append(row)
    names = {"doctor": "kiln doctor", "selftest_fp32": "selftest cuda fp32",
             "selftest_fp16": "selftest cuda fp16", "gpu_tests": "gpu-labelled tests",
             "bench": "kiln bench runs"}
    verdicts = {}
    for k, v in rc.items():
        verdicts[k] = {0: "pass", 3: "nothing checked"}.get(v, "FAIL")
    device = next((k.get("device_name") for k in kiln if k.get("device_name")), None)
    doc = {"verdicts": verdicts, "rc": rc, "elapsed_s": elapsed, "device": device,
           "rows": rows, "torch": torch_rows}
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(f"gpu_check report ({device or 'device unknown'}; {elapsed} s)")
    for k, v in verdicts.items():
        print(f"  {names.get(k, k):<22} {v} (rc {rc[k]})")
    print("\n  batch 1: ratio = kiln p50 / PyTorch p50 (< 1: kiln faster); batch > 1: ratio = "
          "kiln items/s / PyTorch items/s (> 1: kiln faster)")
    print("  PyTorch timed host memory to host memory with a pinned input, like kiln bench; "
          "graph rows against PyTorch's CUDA-graph replay, others against eager")
    hdr = (f"  {'model':<13}{'batch':>5} {'prec':<5}{'graph':<6}{'pinned':<7}{'kiln p50':>9}"
           f"{'kiln/s':>9}{'torch p50':>10}{'torch/s':>9}{'ratio':>7}")
    print(hdr)
    for r in sorted(rows, key=lambda r: (r["model"], r["batch"], r["precision"], r["cuda_graph"],
                                         not r["pinned"])):
        def f(x, d=2):
            return "-" if x is None else f"{x:.{d}f}"
        print(f"  {r['model']:<13}{r['batch']:>5} {r['precision']:<5}"
              f"{'on' if r['cuda_graph'] else 'off':<6}{'on' if r['pinned'] else 'off':<7}"
              f"{f(r['kiln_p50_ms']):>9}{f(r['kiln_per_s'], 0):>9}{f(r['torch_p50_ms']):>10}"
              f"{f(r['torch_per_s'], 0):>9}{f(r['ratio']):>7}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("dir")
    e.add_argument("models")
    b = sub.add_parser("bench")
    b.add_argument("dir")
    b.add_argument("model")
    b.add_argument("--batches", default="1,32")
    b.add_argument("--quick", action="store_true")
    b.add_argument("--device", default="cuda", help="cuda (default); cpu checks this script")
    r = sub.add_parser("report")
    r.add_argument("out")
    r.add_argument("--elapsed", type=int, default=0)
    r.add_argument("--rc", action="append", default=[])
    a = p.parse_args()
    if a.cmd == "export":
        export(a.dir, a.models.split(","))
    elif a.cmd == "bench":
        bench(a.dir, a.model, [int(x) for x in a.batches.split(",") if x], a.quick, a.device)
    else:
        return report(a.out, a.elapsed, a.rc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
