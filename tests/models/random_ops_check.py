#!/usr/bin/env python3
"""kiln's random ops (RandomUniform, RandomNormal, their Like forms, Bernoulli, Multinomial,
training-mode Dropout): statistics, seed semantics, and the output types ONNX's node tests expect.

usage: random_ops_check.py KILN [ONNX_TESTDATA_DIR]

Small models run with `kiln run` (one process per run, so one session per run):
- statistics of 100,000 draws of seeded nodes (so the check is deterministic: the same draws on
  every run and machine): uniform and normal mean and variance within 4 standard errors,
  uniform values inside [low, high); Bernoulli frequencies per probability (p 0 and 1 exact);
  Multinomial class frequencies (a -inf class never drawn); training-mode Dropout (ratio 0.3,
  seeded): kept fraction 0.7 within 4 standard errors, kept values x / 0.7 exactly where the mask
  is true and 0 elsewhere, the same mask for two seeded nodes of one seed;
- seeds: a seeded node gives identical outputs in two sessions, another seed different ones; an
  unseeded node gives different outputs in two sessions, and two unseeded nodes of one graph
  differ from each other; `kiln inspect --optimized` shows the unseeded node kept and the seeded
  one folded;
- within one session (when the Python module sits next to KILN, build/<preset>/python): two runs
  of an unseeded node differ, two runs of a seeded one are identical;
- ONNX's node tests node/test_bernoulli* (their values come from numpy's generator, which no
  engine reproduces): kiln's outputs have the stored outputs' dtype and shape, and are 0 or 1.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pyenv"))
import check_venv  # noqa: E402

check_venv.reexec_in_venv()

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

N = 100_000
FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


def within(value, expected, stderr, what):
    z = (value - expected) / stderr if stderr > 0 else float(value != expected) * np.inf
    check(abs(z) <= 4, f"{what}: {value:.6g} vs {expected:.6g} ({z:+.2f} standard errors)")


def model(nodes, outputs, x_type=TP.FLOAT, x_shape=(1,), opset=22):
    """A graph with input x (kiln run needs one) and the given nodes; x is also passed through."""
    nodes = list(nodes) + [helper.make_node("Identity", ["x"], ["x_out"])]
    outs = [helper.make_tensor_value_info(o, t, None) for o, t in outputs]
    outs.append(helper.make_tensor_value_info("x_out", x_type, None))
    g = helper.make_graph(nodes, "random", [helper.make_tensor_value_info("x", x_type, x_shape)],
                          outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


class Runner:
    def __init__(self, kiln, tmp):
        self.kiln, self.tmp, self.count = kiln, tmp, 0

    def save(self, m, x):
        self.count += 1
        path = os.path.join(self.tmp, f"m{self.count}.onnx")
        onnx.save(m, path)
        np.save(path + ".x.npy", x)
        return path

    def run(self, m, x=np.zeros(1, np.float32), path=None):
        """Outputs {name: array}, or None when kiln failed."""
        path = path or self.save(m, x)
        out = path + f".out{self.count}"
        self.count += 1
        r = subprocess.run([self.kiln, "run", path, "--input", "x=" + path + ".x.npy",
                            "--output-dir", out], capture_output=True, text=True)
        check(r.returncode == 0, f"kiln run {os.path.basename(path)} (rc {r.returncode}) "
                                 f"{r.stderr[-400:]}")
        if r.returncode != 0:
            return None
        return {o.name: np.load(os.path.join(out, o.name + ".npy")) for o in m.graph.output}


def check_uniform_normal(rn):
    m = model([helper.make_node("RandomUniform", [], ["u"], shape=[N], low=-1.0, high=3.0, seed=11.0),
               helper.make_node("RandomNormal", [], ["n"], shape=[N], mean=2.0, scale=0.5,
                                dtype=TP.DOUBLE, seed=12.0)], [("u", TP.FLOAT), ("n", TP.DOUBLE)])
    o = rn.run(m)
    if o is None:
        return
    u, n = o["u"], o["n"]
    check(u.dtype == np.float32 and u.shape == (N,), f"RandomUniform float32[{N}] ({u.dtype}{u.shape})")
    check(n.dtype == np.float64 and n.shape == (N,), f"RandomNormal float64[{N}] ({n.dtype}{n.shape})")
    check(u.min() >= -1.0 and u.max() < 3.0, f"uniform values in [-1, 3): [{u.min()}, {u.max()}]")
    w = 4.0  # uniform on [a, b): variance w^2/12, fourth central moment w^4/80
    var, mu4 = w * w / 12, w**4 / 80
    u64 = u.astype(np.float64)
    within(u64.mean(), 1.0, np.sqrt(var / N), "uniform mean")
    within(u64.var(), var, np.sqrt((mu4 - var * var) / N), "uniform variance")
    within(n.mean(), 2.0, 0.5 / np.sqrt(N), "normal mean")
    within(n.var(), 0.25, 0.25 * np.sqrt(2.0 / N), "normal variance")
    within(float(np.mean(np.abs(n - 2.0) < 0.5)), 0.682689, np.sqrt(0.682689 * 0.317311 / N),
           "normal fraction within one scale of the mean")


def check_like(rn):
    x = np.arange(317 * 3, dtype=np.int32).reshape(317, 3)
    m = model([helper.make_node("RandomUniformLike", ["x"], ["u"], dtype=TP.FLOAT, seed=1.0),
               helper.make_node("RandomNormalLike", ["x"], ["n"], dtype=TP.DOUBLE)],
              [("u", TP.FLOAT), ("n", TP.DOUBLE)], TP.INT32, [317, 3])
    o = rn.run(m, x)
    if o is not None:
        check(o["u"].dtype == np.float32 and o["u"].shape == x.shape,
              f"RandomUniformLike of int32[317,3] with dtype float: {o['u'].dtype}{o['u'].shape}")
        check(o["n"].dtype == np.float64 and o["n"].shape == x.shape,
              f"RandomNormalLike of int32[317,3] with dtype double: {o['n'].dtype}{o['n'].shape}")
    xf = np.zeros((N,), np.float64)
    m = model([helper.make_node("RandomUniformLike", ["x"], ["u"], low=10.0, high=11.0, seed=13.0)],
              [("u", TP.DOUBLE)], TP.DOUBLE, [N])
    o = rn.run(m, xf)
    if o is not None:
        u = o["u"]
        check(u.dtype == np.float64 and u.min() >= 10.0 and u.max() < 11.0,
              f"RandomUniformLike of float64 keeps float64, values in [10, 11) ({u.dtype})")
        within(u.mean(), 10.5, np.sqrt(1 / 12 / N), "RandomUniformLike mean")


def check_bernoulli(rn):
    ps = np.array([0.0, 0.1, 0.25, 0.5, 0.9, 1.0])
    p = np.tile(ps, N // len(ps) + 1)[:N].astype(np.float32)
    m = model([helper.make_node("Bernoulli", ["x"], ["y"], seed=14.0),
               helper.make_node("Bernoulli", ["x"], ["b"], dtype=TP.BOOL, seed=5.0),
               helper.make_node("Bernoulli", ["x"], ["i"], dtype=TP.INT64, seed=5.0)],
              [("y", TP.FLOAT), ("b", TP.BOOL), ("i", TP.INT64)], TP.FLOAT, [N])
    o = rn.run(m, p)
    if o is None:
        return
    y, b, i = o["y"], o["b"], o["i"]
    check(y.dtype == np.float32 and b.dtype == np.bool_ and i.dtype == np.int64,
          f"Bernoulli dtypes float32 (input's), bool, int64: {y.dtype}, {b.dtype}, {i.dtype}")
    check(bool(np.all((y == 0) | (y == 1))), "Bernoulli values are 0 or 1")
    check(bool(np.array_equal(b.astype(np.int64), i)), "Bernoulli with one seed: bool == int64")
    for pv in ps:
        sel = p == np.float32(pv)
        freq = float(y[sel].mean())
        if pv in (0.0, 1.0):
            check(freq == pv, f"Bernoulli p={pv}: frequency exactly {pv} ({freq})")
        else:
            within(freq, float(np.float32(pv)), np.sqrt(pv * (1 - pv) / sel.sum()),
                   f"Bernoulli p={pv} frequency")


def check_training_dropout(rn):
    x = np.random.default_rng(3).uniform(0.5, 2.0, N).astype(np.float32)
    ratio = numpy_helper.from_array(np.array(0.3, np.float32), "ratio")
    train = numpy_helper.from_array(np.array(True), "train")
    m = model([helper.make_node("Dropout", ["x", "ratio", "train"], ["y", "mask"], seed=21.0),
               helper.make_node("Dropout", ["x", "ratio", "train"], ["y2", "mask2"], seed=21.0)],
              [("y", TP.FLOAT), ("mask", TP.BOOL), ("y2", TP.FLOAT), ("mask2", TP.BOOL)],
              TP.FLOAT, [N])
    m.graph.initializer.extend([ratio, train])
    o = rn.run(m, x)
    if o is None:
        return
    y, mask = o["y"], o["mask"]
    within(float(mask.mean()), 0.7, np.sqrt(0.7 * 0.3 / N), "training Dropout kept fraction")
    scale = 1.0 / (1.0 - float(np.float32(0.3)))  # the ratio tensor is float32
    scaled = (x.astype(np.float64) * scale).astype(np.float32)
    check(bool(np.array_equal(y[mask], scaled[mask])) and bool(np.all(y[~mask] == 0)),
          "training Dropout: kept values x / (1 - ratio), dropped ones 0")
    check(bool(np.array_equal(mask, o["mask2"])), "training Dropout: one seed, one mask")


def check_multinomial(rn):
    probs = np.array([[0.1, 0.2, 0.3, 0.4], [0.5, 0.0, 0.25, 0.25]])
    with np.errstate(divide="ignore"):
        logits = (np.log(probs) + np.array([[3.0], [-7.0]])).astype(np.float32)
    for dtype, np_dtype in ((None, np.int32), (TP.INT64, np.int64)):
        attrs = {"sample_size": N // 2, "seed": 15.0}
        if dtype is not None:
            attrs["dtype"] = dtype
        m = model([helper.make_node("Multinomial", ["x"], ["y"], **attrs)],
                  [("y", TP.INT32 if dtype is None else dtype)], TP.FLOAT, [2, 4], opset=7)
        o = rn.run(m, logits)
        if o is None:
            continue
        y = o["y"]
        check(y.dtype == np_dtype and y.shape == (2, N // 2),
              f"Multinomial output {np.dtype(np_dtype)}[2,{N // 2}] ({y.dtype}{y.shape})")
        if np_dtype != np.int32:
            continue
        check(bool(np.all(y[1] != 1)), "Multinomial never draws a class of log-probability -inf")
        for r in range(2):
            for c in range(4):
                pc = probs[r, c]
                if pc == 0:
                    continue
                within(float(np.mean(y[r] == c)), pc, np.sqrt(pc * (1 - pc) / (N // 2)),
                       f"Multinomial row {r} class {c} frequency")


def check_seeds(kiln, rn):
    def one(seed):
        attrs = {} if seed is None else {"seed": seed}
        return model([helper.make_node("RandomNormal", [], ["n"], shape=[3, 5], **attrs),
                      helper.make_node("RandomUniform", [], ["u"], shape=[3, 5], **attrs)],
                     [("n", TP.FLOAT), ("u", TP.FLOAT)])

    seeded, other, unseeded = one(42.0), one(43.0), one(None)
    path = rn.save(seeded, np.zeros(1, np.float32))
    a, b, c = rn.run(seeded, path=path), rn.run(seeded, path=path), rn.run(other)
    upath = rn.save(unseeded, np.zeros(1, np.float32))
    d, e = rn.run(unseeded, path=upath), rn.run(unseeded, path=upath)
    if None in (a, b, c, d, e):
        return
    check(all(np.array_equal(a[k], b[k]) for k in ("n", "u")),
          "seed 42: identical outputs in two sessions")
    check(not np.array_equal(a["u"], c["u"]) and not np.array_equal(a["n"], c["n"]),
          "seeds 42 and 43 give different outputs")
    check(not np.array_equal(d["u"], e["u"]) and not np.array_equal(d["n"], e["n"]),
          "no seed: different outputs in two sessions")
    two = model([helper.make_node("RandomUniform", [], ["u1"], shape=[8]),
                 helper.make_node("RandomUniform", [], ["u2"], shape=[8])],
                [("u1", TP.FLOAT), ("u2", TP.FLOAT)])
    o = rn.run(two)
    if o is not None:
        check(not np.array_equal(o["u1"], o["u2"]), "no seed: two identical nodes of one graph differ")
    both = model([helper.make_node("RandomUniform", [], ["s"], shape=[4], seed=1.0),
                  helper.make_node("RandomUniform", [], ["t"], shape=[4])],
                 [("s", TP.FLOAT), ("t", TP.FLOAT)])
    bpath = rn.save(both, np.zeros(1, np.float32))
    r = subprocess.run([kiln, "inspect", bpath, "--optimized"], capture_output=True, text=True)
    hist = r.stdout.split("optimized nodes:")[-1].split("plan for")[0]
    kept = [ln.split() for ln in hist.splitlines() if ln.strip().startswith("RandomUniform")]
    check(r.returncode == 0 and kept == [["RandomUniform", "1"]],
          f"kiln inspect --optimized: of a seeded and an unseeded RandomUniform, one (the "
          f"unseeded) is left unfolded ({kept})")
    check_one_session(kiln, bpath)


def check_one_session(kiln, path):
    pydir = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(kiln)))),
                         "python")
    code = ("import sys, numpy as np; sys.path.insert(0, sys.argv[1]); import kiln\n"
            "s = kiln.Session(sys.argv[2]); x = {'x': np.zeros(1, np.float32)}\n"
            "a, b = s.run(x), s.run(x)\n"
            "print(int(np.array_equal(a['s'], b['s'])), int(np.array_equal(a['t'], b['t'])))\n")
    if not os.path.isdir(os.path.join(pydir, "kiln")):
        # Under CI (check_venv.require_all) a check that cannot run is a failure.
        check(not check_venv.require_all(),
              f"no Python module at {pydir}: the within-session check did not run")
        return
    r = subprocess.run([sys.executable, "-c", code, pydir, path], capture_output=True, text=True)
    check(r.returncode == 0 and r.stdout.split() == ["1", "0"],
          f"one session, two runs: seeded identical, unseeded different ({r.stdout.strip()} "
          f"{r.stderr[-300:]})")


def check_node_tests(rn, root):
    node = os.path.join(root, "node")
    names = sorted(d for d in os.listdir(node) if d.startswith("test_bernoulli"))
    check(len(names) == 6, f"{len(names)} node/test_bernoulli* directories")
    for name in names:
        d = os.path.join(node, name)
        m = onnx.load(os.path.join(d, "model.onnx"))
        t = onnx.TensorProto()
        with open(os.path.join(d, "test_data_set_0", "input_0.pb"), "rb") as f:
            t.ParseFromString(f.read())
        x = numpy_helper.to_array(t)
        with open(os.path.join(d, "test_data_set_0", "output_0.pb"), "rb") as f:
            t.ParseFromString(f.read())
        want = numpy_helper.to_array(t)
        path = rn.save(m, x)
        out = path + ".out"
        r = subprocess.run([rn.kiln, "run", path, "--input", "x=" + path + ".x.npy",
                            "--output-dir", out], capture_output=True, text=True)
        if r.returncode != 0:
            check(False, f"{name}: kiln run (rc {r.returncode}) {r.stderr[-300:]}")
            continue
        got = np.load(os.path.join(out, "y.npy"))
        check(got.dtype == want.dtype and got.shape == want.shape and
              bool(np.all((got == 0) | (got == 1))),
              f"{name}: {got.dtype}{list(got.shape)} of 0/1 as stored "
              f"({want.dtype}{list(want.shape)}; values from numpy's generator not compared)")


def main():
    kiln = os.path.abspath(sys.argv[1])
    root = sys.argv[2] if len(sys.argv) > 2 else os.environ.get(
        "KILN_ONNX_TESTDATA_DIR",
        os.path.expanduser("~/.cache/kiln/onnx-1.19.1/onnx/backend/test/data"))
    with tempfile.TemporaryDirectory() as tmp:
        rn = Runner(kiln, tmp)
        check_uniform_normal(rn)
        check_like(rn)
        check_bernoulli(rn)
        check_multinomial(rn)
        check_training_dropout(rn)
        check_seeds(kiln, rn)
        if os.path.isdir(os.path.join(root, "node")):
            check_node_tests(rn, root)
        else:
            print(f"note: no ONNX test data at {root}; node/test_bernoulli* not checked")
    if FAILURES:
        print(f"\n{len(FAILURES)} failed")
        sys.exit(1)
    print("\nall random-op checks passed")


if __name__ == "__main__":
    main()
