#!/usr/bin/env python3
"""ONNX's node tests (the pinned onnx 1.19.1's data) through kiln and through ONNX Runtime.

usage: ort_compare.py RUNNER [--atol 1e-7] [--data DIR] [--out FILE.json]

RUNNER is kiln's node-test runner (build/release/tests/onnx_node/kiln_onnx_node_test). It decides
the scope (every node's op in its foundation list, every tensor float32/int32/int64/bool) and
writes one line per in-scope case ($KILN_ONNX_REPORT); ONNX Runtime (the pinned 1.32.0 of
tests/pyenv/check_venv.py, CPU provider, all optimizations) runs the same directories. Both are
judged the same way: exact dtype and shape, floats within rtol 1e-3 and --atol (default 1e-7,
ONNX's own), NaN equal to NaN, other types exact. No skip list: every case counts. Prints both
counts and every case where the two disagree, with each side's reason.

Judged case by case: every case that ORT passes and kiln fails must be listed, with why, in
ort_known_differences.txt (so kiln cannot start failing a case ORT passes and stay green), and a
listed case that kiln now passes, or that ORT fails, must leave the list (it only shrinks). The
runner must end normally (exit 0, or 1 for cases outside its skip list at this tolerance; a signal
or any other code fails) and report at least --min-cases cases (the wheel's floor, 1,755).
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyenv"))
import check_venv  # noqa: E402


def default_data():
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(cache, "kiln", "onnx-1.19.1", "onnx", "backend", "test", "data")


def ort_case(ort, numpy_helper, np, case_dir, atol):
    """"" when ORT reproduces every test_data_set of the case, else why not."""
    try:
        so = ort.SessionOptions()
        so.log_severity_level = 3
        sess = ort.InferenceSession(os.path.join(case_dir, "model.onnx"), so,
                                    providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001: a refusal is a result
        return "load: " + str(e).splitlines()[0][:200]
    sets = sorted(glob.glob(os.path.join(case_dir, "test_data_set_*")))
    if not sets:
        return "no test_data_set_* directories"
    names = [i.name for i in sess.get_inputs()]
    for s in sets:
        feeds = {}
        for i, name in enumerate(names):
            p = os.path.join(s, f"input_{i}.pb")
            if not os.path.exists(p):
                break
            try:  # sequences and optionals are not TensorProtos: this feeder cannot read them
                feeds[name] = numpy_helper.to_array(onnx_load_tensor(p))
            except Exception as e:  # noqa: BLE001
                return f"{os.path.basename(s)}: cannot read input {i} as a tensor: {e}"[:200]
        try:
            outs = sess.run(None, feeds)
        except Exception as e:  # noqa: BLE001
            return os.path.basename(s) + ": " + str(e).splitlines()[0][:200]
        for i, got in enumerate(outs):
            p = os.path.join(s, f"output_{i}.pb")
            if not os.path.exists(p):
                continue
            try:
                want = numpy_helper.to_array(onnx_load_tensor(p))
            except Exception as e:  # noqa: BLE001
                return f"{os.path.basename(s)}: cannot read output {i} as a tensor: {e}"[:200]
            got = np.asarray(got)
            if got.dtype != want.dtype:
                return f"{os.path.basename(s)} output {i}: dtype {got.dtype} != {want.dtype}"
            if got.shape != want.shape:
                return f"{os.path.basename(s)} output {i}: shape {got.shape} != {want.shape}"
            if want.dtype.kind == "f":
                ok = np.isclose(got, want, rtol=1e-3, atol=atol, equal_nan=True)
                if not ok.all():
                    return f"{os.path.basename(s)} output {i}: {int((~ok).sum())} values differ"
            elif not np.array_equal(got, want):
                return f"{os.path.basename(s)} output {i}: values differ"
    return ""


def onnx_load_tensor(path):
    import onnx
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t


def main():
    p = argparse.ArgumentParser()
    p.add_argument("runner")
    p.add_argument("--atol", type=float, default=1e-7)
    p.add_argument("--data", default=default_data())
    p.add_argument("--out")
    p.add_argument("--min-cases", type=int, default=1755)
    p.add_argument("--known", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "ort_known_differences.txt"))
    p.add_argument("--write-known", action="store_true",
                   help="rewrite --known from this run's differences (reasons kept where listed)")
    a = p.parse_args()
    runner = os.path.abspath(a.runner)
    check_venv.reexec_in_venv()
    import numpy as np
    import onnxruntime as ort
    from onnx import numpy_helper

    if not os.path.isdir(a.data):
        check_venv.skip(f"no node-test data at {a.data} (run the onnx_node_tests_onnx_1_19 test "
                        "first)")
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "kiln.tsv")
        env = dict(os.environ, KILN_ONNX_TESTDATA_DIR=a.data, KILN_ONNX_REPORT=report,
                   KILN_ONNX_ATOL=repr(a.atol), KILN_ONNX_MIN_CASES=str(a.min_cases))
        # The skip list is irrelevant to the report; give the wheel's so the run itself is quiet.
        env["KILN_ONNX_SKIP_LIST"] = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "skip_list_onnx_1_19.txt")
        r = subprocess.run([runner], env=env, capture_output=True, text=True)
        if r.returncode not in (0, 1) or not os.path.exists(report):
            print(f"FAIL: the node-test runner ended with {r.returncode} (0 or 1 expected; "
                  f"negative: a signal): {(r.stdout + r.stderr)[-1500:]}")
            return 1
        kiln = {}
        for line in open(report):
            name, verdict, reason = line.rstrip("\n").split("\t", 2)
            kiln[name] = reason if verdict == "fail" else ""
    if len(kiln) < a.min_cases:
        print(f"FAIL: the runner reported {len(kiln)} cases, fewer than the floor of "
              f"{a.min_cases}: the data or the scope shrank")
        return 1
    results = {}
    for name in sorted(kiln):
        suite, case = name.split("/", 1)
        results[name] = {"kiln": kiln[name],
                         "ort": ort_case(ort, numpy_helper, np, os.path.join(a.data, suite, case),
                                         a.atol)}
    kiln_pass = sum(1 for r in results.values() if not r["kiln"])
    ort_pass = sum(1 for r in results.values() if not r["ort"])
    print(f"onnx {os.path.basename(os.path.dirname(os.path.dirname(os.path.dirname(a.data))))} "
          f"node tests, {len(results)} cases (every directory), rtol 1e-3 / atol {a.atol:g}, no skip list:")
    print(f"  kiln {kiln_pass} passed, {len(results) - kiln_pass} failed")
    print(f"  ONNX Runtime {ort.__version__} {ort_pass} passed, {len(results) - ort_pass} failed")
    for name, r in results.items():
        if bool(r["kiln"]) != bool(r["ort"]):
            side = "kiln fails" if r["kiln"] else "ORT fails"
            print(f"  {side}: {name}: {r['kiln'] or r['ort']}")
    if a.out:
        json.dump({"atol": a.atol, "results": results}, open(a.out, "w"), indent=1)
    return judge(results, a.known, a.write_known)


def read_known(path):
    """{case: reason} from the known-differences file ("suite/case  reason", # comments)."""
    known = {}
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line and not line.startswith("#"):
                name, _, reason = line.partition(" ")
                known[name] = reason.strip()
    return known


def skip_reasons():
    """{case: reason} from kiln's skip list for this data (grouped reasons, no paths)."""
    reasons, reason = {}, ""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "skip_list_onnx_1_19.txt")
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("## "):
            reason = line[3:]
        elif line and not line.startswith("#"):
            reasons[line] = reason
    return reasons


def judge(results, path, write):
    """0 when the cases ORT passes and kiln fails are exactly the listed ones."""
    known = read_known(path)
    now = {n: r["kiln"] for n, r in results.items() if r["kiln"] and not r["ort"]}
    new = sorted(set(now) - set(known))
    stale = sorted(n for n in known if n not in now)
    if write:
        with open(path, "w") as f:
            f.write("# ONNX node tests (onnx 1.19.1's data) that ONNX Runtime passes and kiln fails, at\n"
                    "# rtol 1e-3 / atol 1e-7 (tests/onnx_node/ort_compare.py): case, then why.\n"
                    "# ort_compare fails on a case missing here and on a listed case that no longer\n"
                    "# differs: the list only shrinks.\n")
            grouped = skip_reasons()
            for n in sorted(now):
                f.write(f"{n}  {known.get(n) or grouped.get(n) or now[n][:160]}\n")
        print(f"wrote {len(now)} known differences to {path}")
        return 0
    for n in new:
        print(f"  NEW: ORT passes, kiln fails: {n}: {now[n]}")
    for n in stale:
        where = results.get(n)
        why = ("not in this run's scope" if where is None else
               "kiln passes it now" if not where["kiln"] else "ORT fails it too")
        print(f"  STALE: {n} is listed in {os.path.basename(path)} but {why}: remove it")
    print(f"  {len(now)} cases ORT passes and kiln fails, all listed: "
          f"{'yes' if not new else 'no'}; {len(stale)} stale entries")
    return 1 if new or stale else 0


if __name__ == "__main__":
    sys.exit(main())
