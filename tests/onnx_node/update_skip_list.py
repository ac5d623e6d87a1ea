#!/usr/bin/env python3
"""Rewrites a node-test skip list from a run of kiln's node-test runner.

usage: update_skip_list.py RUNNER SKIP_LIST [--data DIR]

The runner (build/release/tests/onnx_node/kiln_onnx_node_test) runs every test directory of the
data folder (DIR, else Debian's libonnx-testdata) and reports each case ($KILN_ONNX_REPORT). Every
failing case goes into SKIP_LIST under a reason:
  - the reason it is already listed under, when a person wrote it (groups whose reason does not
    start with one of the generated prefixes below);
  - "not implemented yet: <ops> (issue 42)" when loading named ops kiln lacks;
  - "dtype not supported yet: <dtypes> (issue 42)" when loading named tensor types kiln lacks;
  - "fails: <the runner's reason>" otherwise: a wrong result or an error of an implemented op,
    which someone must look at.
Cases that pass leave the list (the runner fails a listed case that passes). Run it after adding
ops or dtypes, and read the diff: a case moving from "not implemented" to "fails:" is a bug.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

GENERATED = ("not implemented yet:", "dtype not supported yet:", "fails:")


def read_skip_list(path):
    """(header lines, [(reason, [names])]) in file order."""
    header, groups = [], []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("## "):
                groups.append((line[3:], []))
            elif not line or line.startswith("#"):
                if not groups:
                    header.append(line)
            elif groups:
                groups[-1][1].append(line)
    return header, groups


def run_report(runner, data, skip_list):
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.tsv")
        env = dict(os.environ, KILN_ONNX_REPORT=report, KILN_ONNX_SKIP_LIST=skip_list,
                   KILN_ONNX_MIN_CASES="1")
        if data:
            env["KILN_ONNX_TESTDATA_DIR"] = data
        r = subprocess.run([runner], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
        if r.returncode not in (0, 1):
            sys.exit(f"the runner ended with {r.returncode}: {r.stderr[-2000:]}")
        results = {}
        with open(report) as f:
            for line in f:
                name, verdict, reason = (line.rstrip("\n").split("\t") + ["", ""])[:3]
                results[name] = (verdict, reason)
        return results


def reason_of(err):
    ops = sorted(set(re.findall(r"' ([A-Za-z0-9_]+) \([a-z.]+ opset \d+\): op not implemented",
                                err)))
    if ops:
        return f"not implemented yet: {', '.join(ops)} (issue 42)"
    dtypes = sorted(set(re.findall(r"dtype ([a-z0-9]+) is not supported", err)))
    if dtypes:
        return f"dtype not supported yet: {', '.join(dtypes)} (issue 42)"
    m = re.search(r"shapes of ([A-Za-z0-9_]+) node .* must be [a-z0-9/]+; got ([a-z0-9]+)", err)
    if m:
        return f"dtype not supported yet: {m.group(2)} in {m.group(1)} (issue 42)"
    err = re.sub(r"while (loading|reading) '[^']*'", "", err)
    err = re.sub(r"test_data_set_\d+", "test_data_set_N", err)
    err = re.sub(r"'[^']*' ", "", err, count=1) if err.startswith("load:") else err
    return "fails: " + " ".join(err.split())[:150]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("runner")
    p.add_argument("skip_list")
    p.add_argument("--data", default="")
    a = p.parse_args()
    header, groups = read_skip_list(a.skip_list)
    results = run_report(a.runner, a.data, a.skip_list)
    kept = {}  # hand-written reason -> names still failing
    for reason, names in groups:
        if reason.startswith(GENERATED):
            continue
        for n in names:
            if results.get(n, ("fail",))[0] == "fail":
                kept.setdefault(reason, []).append(n)
    listed = {n for names in kept.values() for n in names}
    auto = {}
    for name, (verdict, err) in sorted(results.items()):
        if verdict == "fail" and name not in listed:
            auto.setdefault(reason_of(err), []).append(name)
    while header and not header[-1].strip():  # the groups below start with their own blank line
        header.pop()
    with open(a.skip_list, "w") as f:
        for line in header:
            f.write(line + "\n")
        for reason, names in list(kept.items()) + sorted(auto.items()):
            f.write(f"\n## {reason}\n")
            for n in sorted(names):
                f.write(n + "\n")
    failing = sum(len(v) for v in kept.values()) + sum(len(v) for v in auto.values())
    print(f"{len(results)} cases, {len(results) - failing} pass, {failing} listed "
          f"({sum(len(v) for v in kept.values())} under written reasons, {len(auto)} generated "
          f"groups)")


if __name__ == "__main__":
    main()
