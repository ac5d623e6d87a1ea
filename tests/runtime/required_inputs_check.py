#!/usr/bin/env python3
"""Every op kiln registers refuses a node without its required inputs when the model is loaded.

usage: required_inputs_check.py KILN

Ops read their required inputs unconditionally, so a node without them must never reach an op
(the session fuzzer's ReduceL2 and Gelu read past their inputs). For each op `kiln ops` lists, at
each opset where its schema changes within kiln's range, a model holding the node with no inputs
(at top level, and inside an If branch, which ONNX's checker does not descend into for ops it does
not know) must fail `kiln inspect` with InvalidModel (exit 12), or be reported unsupported; never
load, never crash. Where an outside schema gives the minimum, the node has all but its last
required input (optional ones empty), so a minimum set too low in kiln fails here too. The
minimum comes from ONNX 1.19.1's schemas (ai.onnx, ai.onnx.ml, ai.onnx.preview.training), from
ONNX Runtime 1.32.0's (com.microsoft), and for kiln's own domain (ops the optimizer makes) from
kiln's table, which this check cannot source elsewhere; ops whose minimum is 0 are listed apart.
"""
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pyenv"))
import check_venv  # noqa: E402

check_venv.reexec_in_venv()

import onnx  # noqa: E402
import onnx.defs  # noqa: E402
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402
from onnxruntime.capi import onnxruntime_pybind11_state as ort_c  # noqa: E402

KILN = sys.argv[1]
FAILURES = []


def check(cond, what):
    if not cond:
        print("FAIL " + what, flush=True)
        FAILURES.append(what)


def ort_schemas():
    newest = {}
    for s in ort_c.get_all_operator_schema():
        key = (s.domain, s.name)
        if key not in newest or s.since_version > newest[key].since_version:
            newest[key] = s
    return newest


def optional_slots(schema):
    return {i for i, p in enumerate(schema.inputs)
            if p.option == onnx.defs.OpSchema.FormalParameterOption.Optional}


def schema_versions(domain, op, lo, hi, ort):
    """[(opset, min_input, optional slots)] where the op's schema changes in [lo, hi] (and lo)."""
    out = []
    if domain == "kiln":
        return None
    if domain == "com.microsoft":
        s = ort.get((domain, op))
        return [(lo, s.min_input, optional_slots(s))] if s else None
    for v in range(lo, hi + 1):
        try:
            s = onnx.defs.get_schema(op, v, "" if domain == "ai.onnx" else domain)
        except onnx.defs.SchemaError:
            continue
        if not out or s.since_version == v:
            out.append((v, s.min_input, optional_slots(s)))
    return out or None


def model(domain, op, opset, nested, inputs):
    node = helper.make_node(op, inputs, ["y"], domain="" if domain == "ai.onnx" else domain)
    imports = [helper.make_opsetid("", opset if domain == "ai.onnx" else 17)]
    if domain != "ai.onnx":
        imports.append(helper.make_opsetid(domain, opset))
    y = helper.make_tensor_value_info("y", TP.FLOAT, None)
    if nested:
        branch = helper.make_graph([node], "then", [], [y])
        other = helper.make_graph([helper.make_node("Constant", [], ["z"], value_float=1.0)],
                                  "else", [], [helper.make_tensor_value_info("z", TP.FLOAT, [])])
        top = helper.make_node("If", ["c"], ["out"], then_branch=branch, else_branch=other)
        g = helper.make_graph([top], "g", [helper.make_tensor_value_info("c", TP.BOOL, []),
                                           helper.make_tensor_value_info("x", TP.FLOAT, [1])],
                              [helper.make_tensor_value_info("out", TP.FLOAT, None)])
    else:
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TP.FLOAT, [1])],
                              [y])
    return helper.make_model(g, opset_imports=imports, ir_version=10)


def run_case(case):
    domain, op, opset, nested, inputs, path = case
    onnx.save(model(domain, op, opset, nested, inputs), path)
    r = subprocess.run([KILN, "inspect", path], capture_output=True, text=True, timeout=60)
    return case, r.returncode, r.stdout + r.stderr


def main():
    listing = subprocess.run([KILN, "ops"], capture_output=True, text=True, check=True).stdout
    ort = ort_schemas()
    cases, no_minimum, unsourced = [], [], []
    tmp = tempfile.mkdtemp()
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[1] != "opsets":
            continue
        full, (lo, hi) = parts[0], map(int, parts[2].split("-"))
        domain, op = full.rsplit(".", 1) if "." in full else ("ai.onnx", full)
        versions = schema_versions(domain, op, lo, hi, ort)
        if versions is None:
            unsourced.append(full)
            versions = [(lo, None, set())]
        for opset, min_input, optional in versions:
            if min_input == 0:
                no_minimum.append(f"{full}-{opset}")
                continue
            # All but the last required input; none where kiln alone knows the minimum.
            inputs = ["" if i in optional else "x" for i in range((min_input or 1) - 1)]
            for nested in (False, True):
                path = os.path.join(tmp, f"{full}-{opset}-{int(nested)}.onnx")
                cases.append((domain, op, opset, nested, inputs, path))
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(run_case, cases))
    for (domain, op, opset, nested, _, _), rc, out in results:
        where = f"{domain}.{op}-{opset}{' in an If branch' if nested else ''}"
        # Refused: InvalidModel at load (exit 12), or the node reported unsupported (`kiln inspect`
        # exits 0 there; a session does not load).
        refused = (rc == 12 and "InvalidModel" in out) or (rc == 0 and "supported: NO" in out)
        check(refused, f"{where}: rc {rc}: {out.strip()[-300:]}")
    print(f"{len(results)} models without their required inputs, {len(results) - len(FAILURES)} "
          f"refused at load; ops with no required input (not checked): {len(no_minimum)}; "
          f"minimum from kiln itself (no outside schema): {', '.join(unsourced) or 'none'}")
    if FAILURES:
        print(f"{len(FAILURES)} failed")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
