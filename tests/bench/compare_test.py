#!/usr/bin/python3
"""Unit checks of bench/compare and bench/anchor_bench.py on synthetic records (no kiln, no
anchors, no models): run order rotation, ratio and median arithmetic, table rows, exit status,
and the anchors' seeded input generator and latency estimators against kiln bench's definitions.

usage: tests/bench/compare_test.py   (numpy needed for anchor_bench's part: Debian's python3-numpy)
"""
import importlib.machinery
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stdout
from unittest import mock

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load(name, path):
    loader = importlib.machinery.SourceFileLoader(name, path)
    spec = importlib.util.spec_from_loader(name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


compare = load("bench_compare", os.path.join(REPO, "bench", "compare"))
anchor = load("bench_anchor", os.path.join(REPO, "bench", "anchor_bench.py"))


def record(runtime, model, batch, rnd, p50=None, throughput=None, ok=True, **extra):
    rec = {"runtime": runtime, "model": model, "batch": batch, "round": rnd, "ok": ok}
    if ok:
        rec["result"] = {"latency_ms": {"p50": p50}, "throughput_per_s": throughput, **extra}
    else:
        rec["error"] = "exit code 1: boom"
    return rec


class RotationTest(unittest.TestCase):
    def test_each_runtime_leads_once_per_cycle(self):
        rts = ["kiln", "ort", "ov-f32", "ov-default"]
        orders = [compare.rotated(rts, k) for k in range(4)]
        self.assertEqual([o[0] for o in orders], rts)
        for o in orders:  # a rotation: same cyclic sequence, nothing lost or repeated
            self.assertEqual(sorted(o), sorted(rts))
            i = o.index("kiln")
            self.assertEqual(o[i:] + o[:i], rts)
        self.assertEqual(compare.rotated(rts, 5), compare.rotated(rts, 1))
        self.assertEqual(compare.rotated(["kiln", "ort"], 1), ["ort", "kiln"])


class OptionsTest(unittest.TestCase):
    def test_bf16_adds_kiln_bf16_after_kiln(self):
        a = compare.parse_args(["--precision", "bf16", "--runtimes", "ort,kiln,ov-default"])
        self.assertEqual(a.runtimes, ["ort", "kiln", "kiln-bf16", "ov-default"])
        self.assertEqual(compare.parse_args([]).runtimes, compare.RUNTIMES)

    def test_bad_options_exit_2(self):
        for argv in (["--runtimes", "kiln,tvm"], ["--runtimes", "ort,ort"], ["--rounds", "0"],
                     ["--batches", "1,x"]):
            with self.assertRaises(SystemExit) as e, redirect_stdout(io.StringIO()), \
                    mock.patch("sys.stderr", io.StringIO()):
                compare.parse_args(argv)
            self.assertEqual(e.exception.code, 2, argv)

    def test_int8_compare_refuses_what_cannot_work_before_any_set_up(self):
        # Checked before the venv or any model is made: a plain error and a non-zero exit.
        script = os.path.join(REPO, "bench", "int8_compare")
        for argv, expect in ((["--quantizer", "ort", "--runtimes", "kiln-int8,kiln-int8-ch"],
                              "kiln-int8-ch needs kiln's quantizer"),
                             (["--quantizer", "nncf", "--runtimes", "kiln-int8,kiln-int8-ch"],
                              "--quantizer nncf: kiln-int8-ch needs kiln's quantizer"),
                             (["--quantizer", "ort", "--runtimes", "kiln-int8,kiln-int8-apart"],
                              "--quantizer ort: kiln-int8-apart needs kiln's quantizer"),
                             (["--quantizer", "nncf", "--runtimes", "kiln-int8,kiln-int8-all"],
                              "--quantizer nncf: kiln-int8-all needs kiln's quantizer"),
                             (["--quantizer", "ort", "--runtimes", "kiln-int8,kiln-int8-float-adds"],
                              "--quantizer ort: kiln-int8-float-adds needs kiln's quantizer"),
                             (["--quantizer", "trt"], "invalid choice: 'trt'")):
            r = subprocess.run([sys.executable, script] + argv, capture_output=True, text=True,
                               timeout=60)
            self.assertNotEqual(r.returncode, 0, argv)
            self.assertIn(expect, r.stderr, argv)

    def test_model_files_shapes_and_inputs(self):
        with tempfile.TemporaryDirectory() as d:
            model, sr = os.path.join(d, "m.onnx"), os.path.join(d, "sr.npy")
            open(model, "wb").close()
            np.save(sr, np.array(16000, dtype=np.int64))
            a = compare.parse_args(["--model-file", f"vad={model}", "--shape",
                                    "vad:state=2x1x128", "--input", f"vad:sr={sr}"])
            self.assertEqual(a.models, ["vad"])
            self.assertEqual(a.files, {"vad": model})
            # Full shapes, whatever the batch; the file fed as given.
            self.assertEqual(compare.shape_args(a, "vad", 4),
                             ["--input", f"sr={sr}", "--shape", "state=2x1x128"])
            self.assertEqual(compare.shape_args(a, "other", 1), [])
            for argv in (["--model-file", "vad"], ["--model-file", f"vad={d}/missing.onnx"],
                         ["--shape", "vad:state=2xax128"], ["--input", "vad:sr=/no/such.npy"],
                         ["--input", f"vad={sr}"]):
                with self.assertRaises(SystemExit) as e, redirect_stdout(io.StringIO()), \
                        mock.patch("sys.stderr", io.StringIO()):
                    compare.parse_args(argv)
                self.assertEqual(e.exception.code, 2, argv)

    def test_comparisons(self):
        self.assertEqual(compare.comparisons(compare.RUNTIMES, "fp32"),
                         [("kiln", "ort"), ("kiln", "ov-f32"), ("kiln", "ov-default")])
        rts = ["kiln", "kiln-bf16", "ort", "ov-f32", "ov-default"]
        self.assertEqual(compare.comparisons(rts, "bf16"),
                         [("kiln", "ort"), ("kiln", "ov-f32"), ("kiln-bf16", "ov-default"),
                          ("kiln-bf16", "ort")])
        self.assertEqual(compare.comparisons(["kiln", "ov-f32"], "fp32"), [("kiln", "ov-f32")])
        self.assertEqual(compare.comparisons(["ort", "ov-f32"], "fp32"), [])


class SummaryTest(unittest.TestCase):
    RTS = ["kiln", "ort", "ov-f32", "ov-default"]

    def runs(self):
        runs = []
        # batch 1: p50 latency; kiln 10, 12, 9 ms; ORT 10, 10, 12; OV-f32 20 each; OV-default
        # 5 each, its round 1 failed.
        for rnd, (k, o) in enumerate([(10, 10), (12, 10), (9, 12)]):
            runs.append(record("kiln", "m", 1, rnd, p50=k, throughput=999))
            runs.append(record("ort", "m", 1, rnd, p50=o, throughput=1))
            runs.append(record("ov-f32", "m", 1, rnd, p50=20, throughput=1, precision="f32"))
            runs.append(record("ov-default", "m", 1, rnd, p50=5, throughput=1, precision="bf16",
                               ok=rnd != 1))
        # batch 32: throughput; kiln 100, 120, 90 items/s; ORT 50 each; latency must be ignored.
        for rnd, k in enumerate([100, 120, 90]):
            runs.append(record("kiln", "m", 32, rnd, p50=1, throughput=k))
            runs.append(record("ort", "m", 32, rnd, p50=1000, throughput=50))
        return runs

    def test_ratios_medians_ranges(self):
        s1, s32 = compare.summarize(self.runs(), ["m"], [1, 32], self.RTS, "fp32")
        c = s1["comparisons"]["kiln/ort"]
        self.assertEqual(c["ratios"], [1.0, 1.2, 0.75])
        self.assertAlmostEqual(c["ratio_median"], 1.0)
        self.assertAlmostEqual(c["ratio_min"], 0.75)
        self.assertAlmostEqual(c["ratio_max"], 1.2)
        self.assertEqual(s1["medians"]["kiln"], 10)
        self.assertEqual(s1["medians"]["ort"], 10)
        self.assertAlmostEqual(s1["comparisons"]["kiln/ov-f32"]["ratio_median"], 0.5)
        # Rounds where the anchor failed drop out of that ratio only.
        self.assertEqual(s1["comparisons"]["kiln/ov-default"]["ratios"], [2.0, 1.8])
        self.assertAlmostEqual(s1["comparisons"]["kiln/ov-default"]["ratio_median"], 1.9)
        self.assertEqual(s1["failed"], ["ov-default"])
        self.assertEqual(s1["ov_default_precision"], ["bf16"])
        self.assertEqual(s1["metric"], "p50 latency (ms)")
        self.assertEqual(s32["metric"], "throughput (items/s)")
        self.assertEqual(s32["comparisons"]["kiln/ort"]["ratios"], [2.0, 2.4, 1.8])
        self.assertAlmostEqual(s32["comparisons"]["kiln/ort"]["ratio_median"], 2.0)
        self.assertIsNone(s32["comparisons"]["kiln/ov-f32"]["ratio_median"])
        self.assertIsNone(s32["medians"]["ov-f32"])

    def test_verdicts_and_rows(self):
        self.assertEqual(compare.verdict(0.8, 1), "kiln 1.25x faster")
        self.assertEqual(compare.verdict(0.8, 32), "kiln 1.25x slower")
        self.assertEqual(compare.verdict(2.0, 32), "kiln 2.00x faster")
        summary = compare.summarize(self.runs(), ["m"], [1, 32], self.RTS, "fp32")
        lines = compare.table_lines(summary, 3, "kiln", "ov-default")
        self.assertIn("used: bf16", lines[1])
        rows = [line for line in lines if line.startswith("m ")]
        self.assertEqual(len(rows), 2)
        self.assertIn("[1.8-2]", rows[0])
        self.assertIn("kiln 1.90x slower (some runs FAILED)", rows[0])
        self.assertIn("no data", rows[1])

    def test_error_cell_names_the_cause(self):
        kiln_err = ("exit code 13: kiln: error: Unsupported: precision bf16 needs a CPU with "
                    "AMX\n  while loading 'm.onnx'")
        self.assertTrue(compare.brief(kiln_err).startswith("exit code 13: kiln: error: Unsup"))
        self.assertEqual(compare.brief("UserWarning: x\nanchor_bench: ort failed on m: E"),
                         "anchor_bench: ort failed on m: E")
        self.assertEqual(compare.brief("a\nlast words\n"), "last words")


class MainLoopTest(unittest.TestCase):
    """main() with the runs faked: every runtime runs once per round in the rotated order, the
    JSON holds them, and one failed run makes the exit status 3."""

    def run_main(self, fail_runtime=None):
        calls = []

        def fake_run_one(rt, cmd, timeout, json_path=None):
            calls.append(rt)
            ok = rt != fail_runtime
            rec = record(rt, None, None, None, p50=10.0, throughput=100.0, ok=ok,
                         precision="f32")
            rec.update(cmd=cmd, wall_s=0.0)
            return rec

        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out.json")
            with mock.patch.object(compare, "run_one", fake_run_one), \
                    mock.patch.object(compare, "find_kiln", lambda p: "/bin/true"), \
                    mock.patch.object(compare, "ensure_venv", lambda v, r: ("py", {})), \
                    mock.patch.object(compare, "ensure_models",
                                      lambda ms, d: {m: f"{m}.onnx" for m in ms}), \
                    redirect_stdout(io.StringIO()) as text:
                rc = compare.main(["--models", "a,b", "--batches", "1,4", "--rounds", "2",
                                   "--workdir", d, "--out", out])
            with open(out) as f:
                doc = json.load(f)
        return rc, calls, doc, text.getvalue()

    def test_order_rotates_and_all_runs_recorded(self):
        rc, calls, doc, text = self.run_main()
        self.assertEqual(rc, 0)
        n = len(compare.RUNTIMES)
        self.assertEqual(len(calls), 2 * 2 * 2 * n)
        firsts = [calls[i] for i in range(0, len(calls), n)]
        self.assertEqual(firsts, [compare.RUNTIMES[k % n] for k in range(8)])
        self.assertEqual(len(doc["runs"]), len(calls))
        self.assertTrue(all(r["position"] == 0 for r in doc["runs"][::n]))
        for s in doc["summary"]:
            for c in s["comparisons"].values():
                self.assertEqual(c["ratios"], [1.0, 1.0])
        self.assertIn("kiln/OV-default", text)

    def test_failed_runtime_is_skipped_and_exit_3(self):
        rc, calls, doc, text = self.run_main(fail_runtime="ov-f32")
        self.assertEqual(rc, 3)
        self.assertEqual(calls.count("ov-f32"), 2)  # once per model, then skipped
        self.assertIn("OV-f32 FAILED", text)


class AnchorInputTest(unittest.TestCase):
    def test_lcg_matches_the_plain_recurrence(self):
        for n in (0, 1, 2, 777, 4096):
            s, ref = anchor.INPUT_SEED, []
            for _ in range(n):
                s = (s * 1103515245 + 12345) % 2 ** 32
                ref.append(s)
            self.assertEqual(anchor.lcg_words(n).tolist(), ref, n)

    def test_seeded_input_values(self):
        x = anchor.seeded_input(np.float32, [2, 3, 5])
        self.assertEqual(x.shape, (2, 3, 5))
        self.assertEqual(x.dtype, np.float32)
        first = (12345 * 1103515245 + 12345) % 2 ** 32
        self.assertEqual(float(x.flat[0]), float(np.float32(first / 2147483648.0 - 1.0)))
        self.assertTrue(((x >= -1) & (x < 1)).all())
        i = anchor.seeded_input(np.int64, [7])
        self.assertEqual(i.tolist(), [(w >> 16) % 4 for w in anchor.lcg_words(7).tolist()])
        with self.assertRaises(ValueError):
            anchor.seeded_input(np.float16, [3])

    def test_concrete_shape(self):
        self.assertEqual(anchor.concrete_shape("x", ["N", 3, 224, 224], 8), [8, 3, 224, 224])
        self.assertEqual(anchor.concrete_shape("x", [None, 3], 2), [2, 3])
        self.assertEqual(anchor.concrete_shape("x", [1, 3], 1), [1, 3])
        with self.assertRaises(ValueError):
            anchor.concrete_shape("x", [1, 3], 4)
        with self.assertRaises(ValueError):
            anchor.concrete_shape("x", ["N", "C"], 1)
        with mock.patch.dict(anchor.SHAPES, {"x": [1, 3, 48, 320]}):  # --shape x=1x3x48x320
            self.assertEqual(anchor.concrete_shape("x", ["N", 3, "H", "W"], 1), [1, 3, 48, 320])
        for argv in (["m.onnx", "--runtime", "ort", "--shape", "x=1xbx3"],
                     ["m.onnx", "--runtime", "ort", "--shape", "=1x3"]):
            with self.assertRaises(SystemExit) as e, redirect_stdout(io.StringIO()), \
                    mock.patch("sys.stderr", io.StringIO()):
                anchor.parse_args(argv)
            self.assertEqual(e.exception.code, 2, argv)

    def test_stats_are_kiln_benchs(self):
        # Nearest rank at round-half-away-from-zero(p/100*(n-1)): for 6 samples the p50 index is
        # round(2.5) = 3 (Python's round() would give 2); population std.
        st = anchor.stats([6.0, 1.0, 5.0, 2.0, 4.0, 3.0])
        self.assertEqual(st["p50"], 4.0)
        self.assertEqual((st["min"], st["max"], st["p99"]), (1.0, 6.0, 6.0))
        self.assertAlmostEqual(st["mean"], 3.5)
        self.assertAlmostEqual(st["std"], (17.5 / 6) ** 0.5)
        self.assertEqual(anchor.stats([2.0])["p90"], 2.0)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    failed = len(result.failures) + len(result.errors)
    print(f"{result.testsRun - failed} passed, {failed} failed")
    sys.exit(1 if failed or not result.testsRun else 0)
