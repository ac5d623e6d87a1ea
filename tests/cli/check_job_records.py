#!/usr/bin/python3
"""Checks the records of `kiln run --images` (tests/cli/image_job_test.sh).

Usage: check_job_records.py FILE[,FILE...] IMAGE_DIR [--bad A,B] [--top-k K] [--labels]
                            [--same-as REF.jsonl]

Every line is complete and parses (JSONL, or CSV with kiln's header); together the files record
every image under IMAGE_DIR (.jpg/.jpeg/.png, any case, recursive) exactly once; the --bad ones
(base names) have an error and the others K classes with scores in (0, 1], descending, that come
from a softmax (sum <= 1), and labels with --labels; with --same-as, classes equal and scores
within 1e-4 of the reference's. Prints "ok" or raises.
"""
import argparse
import csv
import io
import json
import os

ap = argparse.ArgumentParser()
ap.add_argument("files")
ap.add_argument("image_dir")
ap.add_argument("--bad", default="")
ap.add_argument("--top-k", type=int, default=5)
ap.add_argument("--labels", action="store_true")
ap.add_argument("--same-as")
a = ap.parse_args()


def read(path):
    text = open(path, encoding="utf-8").read()
    assert text == "" or text.endswith("\n"), f"{path}: last line incomplete"
    recs = []
    if path.endswith(".csv"):
        rows = list(csv.reader(io.StringIO(text)))
        assert rows[0] == ["path", "status", "top_k", "scores", "labels", "error"], rows[0]
        for r in rows[1:]:
            assert len(r) == 6, r
            rec = {"path": r[0]}
            if r[1] == "error":
                rec["error"] = r[5]
            else:
                assert r[1] == "ok", r
                rec["top_k"] = [int(v) for v in r[2].split(";")]
                rec["scores"] = [float(v) for v in r[3].split(";")]
                if r[4]:
                    rec["labels"] = r[4].split(";")
            recs.append(rec)
    else:
        for n, line in enumerate(text.splitlines(), 1):
            rec = json.loads(line)
            assert isinstance(rec, dict) and isinstance(rec.get("path"), str), (path, n, line)
            recs.append(rec)
    return recs


recs = [r for f in a.files.split(",") for r in read(f)]
paths = [r["path"] for r in recs]
dupes = sorted({p for p in paths if paths.count(p) > 1})
assert not dupes, f"recorded more than once: {dupes[:5]}"
want = set()
for root, _, files in os.walk(a.image_dir):
    for f in files:
        if os.path.splitext(f)[1].lower() in (".jpg", ".jpeg", ".png"):
            want.add(os.path.join(root, f))
got = set(paths)
assert got == want, f"missing {sorted(want - got)[:5]}, extra {sorted(got - want)[:5]}"
bad = set(filter(None, a.bad.split(",")))
ref = {}
if a.same_as:
    ref = {r["path"]: r for r in read(a.same_as)}
for r in recs:
    name = os.path.basename(r["path"])
    if name in bad:
        assert "error" in r and r["error"] and "top_k" not in r, r
        continue
    assert "error" not in r, r
    k, s = r["top_k"], r["scores"]
    assert len(k) == a.top_k == len(s) and len(set(k)) == len(k), r
    assert all(0 <= c < 10 for c in k), r
    assert all(0 < v <= 1 for v in s) and s == sorted(s, reverse=True) and sum(s) <= 1.0001, r
    if a.labels:
        assert len(r["labels"]) == len(k), r
    else:
        assert "labels" not in r, r
    if r["path"] in ref and "top_k" in ref[r["path"]]:
        o = ref[r["path"]]
        n = min(len(k), len(o["top_k"]))
        assert k[:n] == o["top_k"][:n], (r, o)
        assert all(abs(x - y) < 1e-4 for x, y in zip(s, o["scores"])), (r, o)
print("ok")
