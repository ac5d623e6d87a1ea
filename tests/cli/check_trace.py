#!/usr/bin/python3
"""Checks a Chrome/Perfetto trace file kiln wrote (kiln bench/run --trace, Session.trace).

usage: check_trace.py FILE RUNS   prints "ok" or what is wrong (exit 1)

The Trace Event Format's rules that viewers rely on, and kiln's content: a process_name and a
thread_name per thread; RUNS "run" slices; in each run, args.steps step slices of that run, each
inside its run's span (1 us of slack for rounding), on the same thread, named "<op> <node>" (or
the op alone), with a cpu.* kernel (or a layout conversion) as category and the output shapes; steps in a run do not
overlap (the executor runs them one after the other) and take at most the run's duration."""
import json
import sys


def main(path, runs):
    doc = json.load(open(path))
    ev = doc["traceEvents"]
    meta = [e for e in ev if e["ph"] == "M"]
    assert any(e["name"] == "process_name" for e in meta), "no process_name"
    run_slices = [e for e in ev if e["ph"] == "X" and e["cat"] == "run"]
    assert len(run_slices) == runs, f"{len(run_slices)} run slices, want {runs}"
    tids = {e["tid"] for e in meta if e["name"] == "thread_name"}
    for r in run_slices:
        assert r["tid"] in tids, f"thread {r['tid']} has no thread_name"
        index = int(r["name"].split()[1])
        steps = sorted((e for e in ev if e["ph"] == "X" and e["cat"] != "run"
                        and e["args"]["run"] == index), key=lambda e: e["ts"])
        assert len(steps) == r["args"]["steps"] > 0, (len(steps), r["args"])
        for s in steps:
            assert s["tid"] == r["tid"], "a step on another thread than its run"
            assert s["cat"].startswith("cpu.") or s["args"]["op"] == "LayoutConversion", s

            assert s["name"].startswith(s["args"]["op"]), s["name"]
            assert s["dur"] >= 0 and s["ts"] >= r["ts"] - 1, (s, r)
            assert s["ts"] + s["dur"] <= r["ts"] + r["dur"] + 1, (s, r)
            assert "[" in s["args"]["outputs"] or s["args"]["outputs"] == "dynamic", s["args"]
        for a, b in zip(steps, steps[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + 1, ("overlapping steps", a, b)
        assert sum(s["dur"] for s in steps) <= r["dur"] + 1
    print("ok")


if __name__ == "__main__":
    try:
        main(sys.argv[1], int(sys.argv[2]))
    except (AssertionError, KeyError, ValueError, TypeError, IndexError) as e:
        print("bad trace:", repr(e)[:500])
        sys.exit(1)
