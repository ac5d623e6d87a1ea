#!/usr/bin/env python3
"""atheris fuzzer of the Python API's argument conversion (python/src/module.cc, python/kiln/).

usage, in the fuzz venv with PYTHONPATH=<build>/python (scripts/fuzz.sh python does both):
  python_args_fuzz.py [libFuzzer flags] [CORPUS_DIR | INPUT_FILE ...]

Each input's bytes (atheris.FuzzedDataProvider) pick one call a user makes and its arguments:
kiln.Session(model, device, precision, threads, **options) with the model as bytes, bytearray,
memoryview, a path, garbage or no model at all; run / __call__ / run_into / prepare /
describe_plan / bench / trace with feeds as dicts, lists, None or strings whose values are numpy
arrays of every dtype (object, str, bytes, datetime, structured, complex, big-endian, bfloat16)
and layout (Fortran, strided, reversed, transposed, broadcast, read-only, misaligned, zero-size,
2**40 elements over one), Python scalars, nested and ragged lists, memoryviews and torch tensors
(DLPack), under names that are and are not the model's; kiln.Batcher, kiln.quantize,
kiln.ImageDecoder, kiln.top_k and kiln.ort.InferenceSession likewise. The models are built here
with onnx.helper: Add of two inputs per dtype and declared shape (symbolic, fixed, none, scalar,
2**40), And of bools, StringConcat, a sequence concatenation, an optional, MatMul for quantize.

The rule: a call returns what numpy computes (Add: numpy's + after the same-kind cast kiln
documents, with numpy's broadcasting; And, string concatenation, sequence concatenation,
OptionalHasElement likewise) or raises kiln.Error (any subclass), TypeError, ValueError or
MemoryError. Any other exception fails the input, and so does a crash, an abort or a hang
(libFuzzer's -timeout); well-formed calls (an ndarray of the input's dtype kind and declared
shape, a valid model, default options) must succeed. atheris keeps a failing input.

Coverage: kiln's Python modules (atheris.instrument_imports) and this file's functions are
instrumented. The native extension kiln._kiln and libkiln.so are not: they are the release
build's, without -fsanitize=fuzzer or ASan, so libFuzzer's feedback comes from the Python side and
a C++ memory error is found only when it crashes the process.
"""
import asyncio
import atexit
import functools
import inspect
import os
import pathlib
import sys
import tempfile
import warnings

import atheris

with atheris.instrument_imports(include=["kiln"]):
    import kiln
    import kiln.ort

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

try:
    import ml_dtypes  # bfloat16 and float8 numpy dtypes
except ImportError:
    ml_dtypes = None
try:
    import torch  # Debian's python3-torch: DLPack feeds
except ImportError:
    torch = None

ALLOWED = (kiln.Error, TypeError, ValueError, MemoryError)
WORK = tempfile.mkdtemp(prefix="kiln_python_fuzz_")
os.chdir(WORK)  # relative paths the fuzzer makes up land here
warnings.simplefilter("ignore")
np.seterr(all="ignore")


class Finding(AssertionError):
    """A broken rule: atheris reports it and keeps the input."""


def call(what, fn, *args, must=False, **kw):
    """(True, fn(...)) or (False, the exception) when it is one kiln documents; anything else, or
    any exception but MemoryError when `must`, is a Finding."""
    try:
        return True, fn(*args, **kw)
    except ALLOWED as e:
        if must and not isinstance(e, MemoryError):
            raise Finding(f"{what}: a well-formed call raised {type(e).__name__}: {e}") from e
        return False, e
    except Exception as e:  # noqa: BLE001: the finding is which class it was
        raise Finding(f"{what}: raised {type(e).__module__}.{type(e).__name__}, which kiln does "
                      f"not document: {e!r}") from e


def work_path(text):
    """A path inside WORK made of the fuzzer's text (never outside it)."""
    return os.path.join(WORK, text.replace("..", "__").lstrip("/"))


# ---- models ----------------------------------------------------------------------------------

NUMERIC = ["float32", "float64", "float16", "int8", "uint8", "int16", "uint16", "int32", "int64",
           "uint32", "uint64"]
DECLARED = {"sym": ["N", 3], "fixed": [2, 3], "none": None, "scalar": [], "huge": [2**40, 3],
            "rank3": ["a", "b", "c"], "unknown": [None, None]}


def onnx_type(dtype):
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def serialize(nodes, inputs, outputs, opset=17, inits=()):
    g = helper.make_graph(nodes, "fuzz", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m.SerializeToString()


class Spec:
    """A fuzzed model: kind ("add", "and", "str", "seq", "opt", "mm"), element dtype, declared
    shape of its tensor inputs, input and output names, and its serialized bytes."""

    def __init__(self, kind, dtype="float32", decl="sym"):
        self.kind, self.dtype, self.decl = kind, dtype, decl
        shape = DECLARED[decl]
        vi = helper.make_tensor_value_info
        if kind in ("add", "and"):
            op = "Add" if kind == "add" else "And"
            t = onnx_type(dtype)
            self.inputs, self.outputs = ["A", "B"], ["C", "D"]
            self.bytes = serialize(
                [helper.make_node(op, ["A", "B"], ["C"]),
                 helper.make_node("Identity", ["B"], ["D"])],
                [vi("A", t, shape), vi("B", t, shape)], [vi("C", t, None), vi("D", t, shape)])
        elif kind == "str":
            self.inputs, self.outputs = ["x", "y"], ["z"]
            self.bytes = serialize([helper.make_node("StringConcat", ["x", "y"], ["z"])],
                                   [vi("x", TensorProto.STRING, [None]),
                                    vi("y", TensorProto.STRING, [None])],
                                   [vi("z", TensorProto.STRING, [None])], opset=20)
        elif kind == "seq":
            self.inputs, self.outputs = ["s", "t"], ["s2", "c", "n"]
            self.bytes = serialize(
                [helper.make_node("SequenceInsert", ["s", "t"], ["s2"]),
                 helper.make_node("ConcatFromSequence", ["s2"], ["c"], axis=0),
                 helper.make_node("SequenceLength", ["s2"], ["n"])],
                [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None),
                 vi("t", TensorProto.FLOAT, [None])],
                [helper.make_tensor_sequence_value_info("s2", TensorProto.FLOAT, None),
                 vi("c", TensorProto.FLOAT, None), vi("n", TensorProto.INT64, [])], opset=20)
        elif kind == "opt":
            opt = helper.make_optional_type_proto(
                helper.make_tensor_type_proto(TensorProto.FLOAT, [None]))
            self.inputs, self.outputs = ["o"], ["has"]
            self.bytes = serialize([helper.make_node("OptionalHasElement", ["o"], ["has"])],
                                   [helper.make_value_info("o", opt)],
                                   [vi("has", TensorProto.BOOL, [])], opset=20)
        else:  # "mm": what kiln.quantize needs (a MatMul), over a file
            w = numpy_helper.from_array((np.arange(12, dtype=np.float32) / 7).reshape(4, 3), "W")
            self.inputs, self.outputs = ["A", "B"], ["C"]
            self.bytes = serialize(
                [helper.make_node("MatMul", ["A", "W"], ["M"]),
                 helper.make_node("Add", ["M", "B"], ["C"])],
                [vi("A", TensorProto.FLOAT, ["N", 4]), vi("B", TensorProto.FLOAT, ["N", 3])],
                [vi("C", TensorProto.FLOAT, ["N", 3])], inits=[w])
        self.path = work_path(f"model_{kind}_{dtype}_{decl}.onnx")
        with open(self.path, "wb") as f:
            f.write(self.bytes)

    def input_dtype(self, name):
        return {"and": "bool", "str": "str", "add": self.dtype}.get(self.kind, "float32")


@functools.lru_cache(maxsize=None)
def spec(kind, dtype="float32", decl="sym"):
    return Spec(kind, dtype, decl)


@functools.lru_cache(maxsize=None)
def default_session(kind, dtype="float32", decl="sym"):
    return kiln.Session(spec(kind, dtype, decl).bytes)


def pick_spec(fdp):
    r = fdp.ConsumeIntInRange(0, 15)
    if r < 10:
        return spec("add", fdp.PickValueInList(NUMERIC), fdp.PickValueInList(list(DECLARED)))
    if r == 10:
        return spec("and", "bool", fdp.PickValueInList(["sym", "none", "scalar"]))
    return spec(["str", "seq", "opt", "add", "add"][r - 11])


# ---- values ----------------------------------------------------------------------------------

EXTRA_DTYPES = ["bool", "complex64", "complex128", ">f4", ">f8", ">i4", ">u2", "longdouble",
                "object", "U3", "S2", "M8[s]", "m8[ms]", "V4", [("x", "<f4"), ("y", "i1")]]
if ml_dtypes is not None:
    EXTRA_DTYPES += [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn]
SMALL_DIMS = [0, 1, 2, 3, 4, 5]


def gen_text(fdp, n=6):
    return fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, n))


def gen_shape(fdp, decl):
    """A shape that fits the declaration (symbolic dims any size, no declaration any rank)."""
    if decl is None:
        return tuple(fdp.PickValueInList(SMALL_DIMS) for _ in range(fdp.ConsumeIntInRange(0, 3)))
    return tuple(d if isinstance(d, int) and d < 2**20 else fdp.PickValueInList(SMALL_DIMS)
                 for d in decl)


def gen_object(fdp):
    r = fdp.ConsumeIntInRange(0, 7)
    return [lambda: gen_text(fdp), lambda: fdp.ConsumeBytes(4), lambda: fdp.ConsumeInt(9),
            lambda: fdp.ConsumeFloat(), lambda: None, lambda: [1, "x"], lambda: 2**80,
            lambda: gen_text(fdp).encode("utf-8", "surrogatepass")][r]()


def gen_array(fdp, dtype, shape):
    """A C-contiguous array of `dtype` and `shape`, values from the fuzzer's bytes."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    if dt.kind == "O":
        a = np.empty(n, object)
        for i in range(n):
            a[i] = gen_object(fdp) if fdp.ConsumeBool() else gen_text(fdp)
        return a.reshape(shape)
    if dt.kind in "US":
        items = [gen_text(fdp, dt.itemsize) for _ in range(n)]
        if dt.kind == "S":
            items = [s.encode("utf-8", "surrogatepass")[:dt.itemsize] for s in items]
        return np.array(items, dtype=dt).reshape(shape) if n else np.zeros(shape, dt)
    if dt.kind in "bV" or dt.names:
        raw = np.frombuffer(fdp.ConsumeBytes(n).ljust(n, b"\0"), np.uint8)
        return (raw & 1).astype(bool).reshape(shape) if dt.kind == "b" else np.zeros(shape, dt)
    if dt.kind in "Mm":
        raw = fdp.ConsumeBytes(8 * n).ljust(8 * n, b"\0")
        return np.frombuffer(raw, np.int64).view(dt).reshape(shape).copy()
    if fdp.ConsumeBool() or dt.kind == "f" and dt.itemsize > 8 or dt.name in ("bfloat16",
                                                                               "float8_e4m3fn"):
        raw = np.frombuffer(fdp.ConsumeBytes(n).ljust(n, b"\0"), np.int8)
        return raw.astype(dt).reshape(shape)  # small, ordinary values
    raw = fdp.ConsumeBytes(dt.itemsize * n).ljust(dt.itemsize * n, b"\0")
    return np.frombuffer(raw, dt).reshape(shape).copy()  # any bits: NaNs, infinities


class Sub(np.ndarray):
    """An ndarray subclass (as libraries make): kiln must treat it as the array it is."""


LAYOUTS = ["c", "fortran", "strided", "reversed", "transposed", "broadcast", "readonly",
           "misaligned", "swapped", "subclass", "matrix", "memoryview", "list", "scalar",
           "torch", "torch_t", "torch_bf16", "huge", "zero_huge"]


def layout(fdp, a):
    """`a` in another form or layout (the references are computed from what is returned, so a
    form may change values or shape: "broadcast", "huge", "zero_huge")."""
    how = fdp.PickValueInList(LAYOUTS)
    numeric = a.dtype.kind in "biufc" and not a.dtype.names and a.dtype.itemsize <= 16
    if how == "fortran":
        return np.asfortranarray(a)
    if how == "strided" and a.ndim:
        return np.repeat(a, 2, axis=0)[::2]
    if how == "reversed" and a.ndim:
        return a[::-1].copy()[::-1]
    if how == "transposed":
        return np.ascontiguousarray(a.T).T
    if how == "broadcast" and a.ndim and a.size:
        return np.broadcast_to(a[:1], a.shape)  # zero strides, read-only
    if how == "readonly":
        a = a.copy()
        a.setflags(write=False)
        return a
    if how == "misaligned" and a.dtype.kind != "O":
        raw = b"\0" + a.tobytes()
        return np.frombuffer(raw, a.dtype, offset=1).reshape(a.shape)
    if how == "swapped" and numeric and a.dtype.itemsize > 1:
        return a.astype(a.dtype.newbyteorder())
    if how == "subclass":
        return a.view(Sub)
    if how == "matrix" and a.ndim == 2 and a.dtype.kind != "O":
        return np.asmatrix(a)
    if how == "memoryview" and numeric and a.dtype.isnative and a.dtype.itemsize <= 8:
        return memoryview(np.ascontiguousarray(a))
    if how == "list":
        return a.tolist()
    if how == "scalar" and a.ndim == 0:
        return a[()]
    if how.startswith("torch") and torch is not None and numeric and a.dtype.isnative and \
            a.dtype.kind != "c" and a.dtype.itemsize <= 8 and \
            a.dtype.name not in ("uint16", "uint32", "uint64"):
        t = torch.from_numpy(a.copy())
        if how == "torch_t":
            return t.t() if t.dim() == 2 else t
        if how == "torch_bf16" and a.dtype.kind == "f":
            return t.to(torch.bfloat16)
        return t
    if how == "huge":
        zero = np.zeros(1, a.dtype)
        return np.lib.stride_tricks.as_strided(zero, shape=(2**40,) + a.shape[1:],
                                               strides=(0,) * a.ndim if a.ndim else (0,))
    if how == "zero_huge":
        return np.zeros((0, 2**40), a.dtype)
    return a


def as_numpy(value):
    """The array kiln sees in a value: numpy's, except that bytes and bytearray are uint8 buffers
    (nanobind reads any buffer-protocol object as an array)."""
    if isinstance(value, (bytes, bytearray)):
        return np.frombuffer(value, np.uint8)
    if torch is not None and isinstance(value, torch.Tensor):
        return value.float().numpy() if value.dtype == torch.bfloat16 else value.numpy()
    return np.asarray(value)


def gen_value(fdp, dtype, decl, depth=0):
    """A feed for an input of `dtype` declared `decl`: mostly arrays of its kind and shape in
    every layout, else anything a caller might pass."""
    r = fdp.ConsumeIntInRange(0, 15)
    if r < 8:
        return layout(fdp, gen_array(fdp, dtype, gen_shape(fdp, decl)))
    if r < 10:
        dt = fdp.PickValueInList(NUMERIC + EXTRA_DTYPES)
        shape = gen_shape(fdp, decl if fdp.ConsumeBool() else None)
        return layout(fdp, gen_array(fdp, dt, shape))
    if r == 10:
        return fdp.PickValueInList([None, True, 0, -1, 2**64, 1.5, float("nan"), 1j,
                                    np.float32(2), np.int64(3)])
    if r == 11:
        return gen_text(fdp) if fdp.ConsumeBool() else fdp.ConsumeBytes(6)
    if r in (12, 13) and depth < 2:
        items = [gen_value(fdp, dtype, None, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 3))]
        return items if r == 12 else tuple(items)
    if r == 14:
        return {"A": 1} if fdp.ConsumeBool() else object()
    return gen_object(fdp)


def gen_name(fdp, names):
    r = fdp.ConsumeIntInRange(0, 9)
    if r < 7:
        return fdp.PickValueInList(names)
    if r == 7:
        return gen_text(fdp)
    return fdp.PickValueInList([1, None, b"A", ("A",), "A\0", "\udc80"])


def gen_feeds(fdp, sp):
    """Feeds for the model: {name: value} mostly, sometimes not a dict at all."""
    r = fdp.ConsumeIntInRange(0, 15)
    if r == 13:
        return [gen_value(fdp, sp.input_dtype(n), DECLARED.get(sp.decl)) for n in sp.inputs]
    if r == 14:
        return fdp.PickValueInList([None, "A", 3, ()])
    feeds = {}
    for n in sp.inputs:
        if fdp.ConsumeIntInRange(0, 15) != 15:
            feeds[n] = gen_feed(fdp, sp, n)
    if r == 15:
        feeds[gen_name(fdp, sp.inputs + sp.outputs)] = gen_feed(fdp, sp, sp.inputs[0])
    return feeds


def gen_feed(fdp, sp, name):
    if sp.kind == "seq" and name == "s":
        if fdp.ConsumeIntInRange(0, 7) == 7:
            return gen_value(fdp, "float32", None)
        items = [gen_value(fdp, "float32", [None]) for _ in range(fdp.ConsumeIntInRange(0, 3))]
        return items if fdp.ConsumeBool() else tuple(items)
    if sp.kind == "opt" and fdp.ConsumeBool():
        return None
    if sp.kind in ("seq", "opt"):
        return gen_value(fdp, "float32", [None])
    if sp.kind == "str":
        dt = fdp.PickValueInList(["U4", "object", "S3", "float32"])
        return layout(fdp, gen_array(fdp, dt, gen_shape(fdp, [None])))
    return gen_value(fdp, sp.input_dtype(name), DECLARED[sp.decl])


# ---- what well-formed means, and the references ----------------------------------------------

def fits(shape, decl):
    return decl is None or len(shape) == len(decl) and all(
        not isinstance(d, int) or d == s for d, s in zip(decl, shape))


def plain(v):
    return isinstance(v, np.ndarray) and not isinstance(v, np.matrix) and v.size < 2**20


def well_formed(sp, feeds):
    """Feeds kiln must accept: a dict of exactly the inputs, each an ndarray of the input's
    kind (castable within it) and declared shape, the tensors of one shape."""
    if type(feeds) is not dict or set(feeds) != set(sp.inputs):
        return False
    if sp.kind in ("add", "and"):
        a, b = feeds["A"], feeds["B"]
        want = np.dtype(sp.input_dtype("A"))
        return all(plain(v) and v.dtype.kind == want.kind and not v.dtype.names and
                   np.can_cast(v.dtype, want, "same_kind") and fits(v.shape, DECLARED[sp.decl])
                   for v in (a, b)) and a.shape == b.shape
    if sp.kind == "str":
        def utf8(v):  # kiln takes str as UTF-8 with os.fsdecode's escapes of other bytes
            try:
                return all(isinstance(e, str) and e.encode("utf-8", "surrogateescape") is not None
                           for e in v.ravel().tolist())
            except UnicodeEncodeError:
                return False
        return all(plain(v) and v.dtype.kind in "UO" and v.ndim == 1 and utf8(v)
                   for v in feeds.values()) and feeds["x"].shape == feeds["y"].shape
    if sp.kind == "opt":
        v = feeds["o"]
        return v is None or plain(v) and v.dtype == np.float32 and v.ndim == 1
    return False


def same(what, got, want, tol):
    if not isinstance(got, np.ndarray):
        raise Finding(f"{what}: got a {type(got).__name__}, want an ndarray")
    if got.dtype != want.dtype or got.shape != want.shape:
        raise Finding(f"{what}: got {got.dtype}{list(got.shape)}, numpy gives "
                      f"{want.dtype}{list(want.shape)}")
    if want.dtype.kind == "f" and tol:
        ok = np.allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    elif want.dtype.kind == "f":
        ok = np.array_equal(got, want, equal_nan=True)
    else:
        ok = np.array_equal(got, want)
    if not ok:
        raise Finding(f"{what}: values differ from numpy's:\n{got!r}\nwant\n{want!r}")


def expected(sp, feeds):
    """{output: numpy's value} for feeds kiln accepted (a Finding where numpy cannot)."""
    if type(feeds) is not dict or set(feeds) != set(sp.inputs):
        raise Finding(f"kiln ran with feeds named {sorted(map(repr, feeds))}; the inputs are "
                      f"{sp.inputs}")
    try:
        if sp.kind in ("add", "and"):
            dt = sp.input_dtype("A")
            a, b = (as_numpy(feeds[n]).astype(dt) for n in ("A", "B"))
            return {"C": a + b if sp.kind == "add" else np.logical_and(a, b), "D": b}
        if sp.kind == "str":
            def utf8(v):
                return np.vectorize(
                    lambda e: e if isinstance(e, bytes) else e.encode("utf-8", "surrogateescape"),
                    otypes=[object])(np.asarray(v).astype(object))
            z = np.frompyfunc(lambda p, q: (p + q).decode("utf-8", "surrogateescape"), 2, 1)(
                utf8(feeds["x"]), utf8(feeds["y"]))
            return {"z": np.asarray(z, dtype=object)}
        if sp.kind == "seq":
            items = [as_numpy(v).astype(np.float32) for v in list(feeds["s"]) + [feeds["t"]]]
            return {"s2": items, "c": np.concatenate(items, axis=0), "n": np.int64(len(items))}
        return {"has": np.array(feeds["o"] is not None)}
    except (ValueError, TypeError) as e:
        raise Finding(f"kiln ran feeds numpy cannot compute ({type(e).__name__}: {e}): "
                      f"{feeds!r}") from e


def check(sp, feeds, out, tol=0.0, names=None):
    want = expected(sp, feeds)
    names = list(dict.fromkeys(names)) if names is not None else sp.outputs
    if not isinstance(out, dict) or sorted(out) != sorted(names):
        raise Finding(f"outputs {list(out)}; asked for {names}")
    for n in names:
        if sp.kind == "seq" and n == "s2":
            if not isinstance(out[n], list) or len(out[n]) != len(want[n]):
                raise Finding(f"s2: {out[n]!r}, want {len(want[n])} arrays")
            for g, w in zip(out[n], want[n]):
                same("s2[i]", g, w, tol)
        elif sp.kind == "seq" and n == "n":
            if int(out[n]) != int(want[n]):
                raise Finding(f"n: {out[n]!r}, want {want[n]}")
        else:
            same(n, out[n], np.asarray(want[n]) if sp.kind != "str" else want[n], tol)


# ---- the calls -------------------------------------------------------------------------------

def op_run(fdp):
    sp = pick_spec(fdp)
    s = default_session(sp.kind, sp.dtype, sp.decl)
    feeds = gen_feeds(fdp, sp)
    how = fdp.ConsumeIntInRange(0, 3)
    if how == 0:
        ok, out = call("run", s.run, feeds, must=well_formed(sp, feeds))
        names = None
    elif how == 1:
        ok, out = call("__call__", s, feeds, must=well_formed(sp, feeds))
        names = None
    else:
        names = [gen_name(fdp, sp.outputs) for _ in range(fdp.ConsumeIntInRange(0, 3))]
        if how == 3:
            names = tuple(names) if fdp.ConsumeBool() else fdp.PickValueInList(["C", 3, None])
        good = isinstance(names, list) and all(n in sp.outputs for n in names)
        ok, out = call("run(outputs=)", s.run, feeds, names, must=good and well_formed(sp, feeds))
        names = names if isinstance(names, (list, tuple)) else None
    if ok:
        check(sp, feeds, out, names=names)


def op_run_into(fdp):
    sp = spec("add", fdp.PickValueInList(NUMERIC), fdp.PickValueInList(["sym", "fixed", "none"]))
    s = default_session("add", sp.dtype, sp.decl)
    feeds = gen_feeds(fdp, sp)
    outs = {}
    for _ in range(fdp.ConsumeIntInRange(0, 3)):
        name = gen_name(fdp, sp.outputs)
        shape = gen_shape(fdp, DECLARED[sp.decl] if fdp.ConsumeBool() else None)
        dt = sp.dtype if fdp.ConsumeIntInRange(0, 3) != 3 else fdp.PickValueInList(NUMERIC)
        outs[name] = layout(fdp, np.full(shape, 7, dt)) if fdp.ConsumeIntInRange(0, 7) != 7 else \
            gen_value(fdp, dt, None)
    if fdp.ConsumeIntInRange(0, 15) == 15:
        outs = list(outs.values())
    ok, _ = call("run_into", s.run_into, feeds, outs)
    if ok:
        want = expected(sp, feeds)
        for name, arr in outs.items():
            if name not in want:
                raise Finding(f"run_into took an output named {name!r}")
            same(f"run_into {name}", as_numpy(arr), want[name], 0.0)


def gen_dims(fdp):
    r = fdp.ConsumeIntInRange(0, 7)
    if r < 5:
        return [fdp.PickValueInList([0, 1, 2, 3, 5, -1, 2**31, 2**40, 2**62, 2**63 - 1, 2**63])
                for _ in range(fdp.ConsumeIntInRange(0, 4))]
    return fdp.PickValueInList([None, "23", (2, 3), np.array([2, 3]), [2.5, 3], {2: 3}, [None]])


def op_prepare(fdp):
    sp = spec("add", fdp.PickValueInList(NUMERIC), fdp.PickValueInList(list(DECLARED)))
    s = default_session("add", sp.dtype, sp.decl)
    shapes = {gen_name(fdp, sp.inputs): gen_dims(fdp) for _ in range(fdp.ConsumeIntInRange(0, 3))}
    if fdp.ConsumeIntInRange(0, 15) == 15:
        shapes = list(shapes.items())
    call("prepare", s.prepare, shapes)


def op_describe_plan(fdp):
    sp = pick_spec(fdp)
    feeds = gen_feeds(fdp, sp)
    ok, text = call("describe_plan", default_session(sp.kind, sp.dtype, sp.decl).describe_plan,
                    feeds)
    if ok and not isinstance(text, str):
        raise Finding(f"describe_plan gave {type(text).__name__}")


def op_bench_trace(fdp):
    sp = spec("add", "float32", "sym")
    s = default_session("add", "float32", "sym")
    feeds = gen_feeds(fdp, sp) if fdp.ConsumeIntInRange(0, 3) != 3 else None
    r = fdp.ConsumeIntInRange(0, 2)
    count = fdp.PickValueInList([1, 2, 0, -1, "2", 2.5, None])
    if r == 0:
        ok, res = call("bench", s.bench, feeds, iterations=count,
                       warmup=fdp.PickValueInList([0, 1, -1, "1", None]))
        if ok and not all(np.isfinite(res[k]) for k in ("p50_ms", "mean_ms")):
            raise Finding(f"bench: {res}")
    elif r == 1:
        path = work_path("trace.json") if fdp.ConsumeIntInRange(0, 7) != 7 else \
            work_path(gen_text(fdp))
        call("trace", s.trace, feeds, path, fdp.PickValueInList([count, 2**40]))
    else:
        ok, out = call("run_async", asyncio.run, s.run_async(feeds or {}))
        if ok:
            check(sp, feeds or {}, out)


def gen_model(fdp, sp):
    """(model argument, whether it is a valid model)."""
    r = fdp.ConsumeIntInRange(0, 19)
    good = [lambda: sp.bytes, lambda: bytearray(sp.bytes), lambda: memoryview(sp.bytes),
            lambda: sp.path, lambda: pathlib.Path(sp.path)]
    if r < len(good):
        return good[r](), True
    bad = [lambda: sp.bytes[:fdp.ConsumeIntInRange(0, len(sp.bytes))],
           lambda: fdp.ConsumeBytes(64), lambda: "", lambda: work_path("no_such.onnx"),
           lambda: WORK, lambda: sp.path + "\0x", lambda: os.fsencode(sp.path),
           lambda: memoryview(np.frombuffer(sp.bytes, np.uint8)[::2]), lambda: None,
           lambda: 3, lambda: [sp.bytes], lambda: work_path(gen_text(fdp)),
           lambda: "\udc80.onnx", lambda: np.frombuffer(sp.bytes, np.uint8),
           # a name that is not UTF-8 (ONNX's names are proto2 strings: any bytes)
           lambda: sp.bytes.replace(b"\x01" + fdp.PickValueInList(sp.inputs + sp.outputs)[:1]
                                    .encode(), b"\x01\xff"),
           lambda: bytes(b ^ 0x20 if i == fdp.ConsumeIntInRange(0, len(sp.bytes)) else b
                         for i, b in enumerate(sp.bytes))]
    return bad[(r - len(good)) % len(bad)](), False


OPTIONS = {
    "device": (["cpu", "cpu:0"], ["cuda", "cuda:1", "cpu:x", "", "tpu", ":", "cuda:-1",
                                  "cuda:" + "9" * 25, 0, None, b"cpu", "\udc80"]),
    "precision": (["fp32"], ["bf16", "fp16", "int8", "FP32", "", "fp64", None, 32, "\udc80"]),
    "threads": ([None, 1, 2], [0, -1, 2**31, 2**64, 1.5, "2", np.int64(2)]),
    "optimize": ([True, False], [None, 0, "yes"]),
    "disabled_passes": ([(), []], [["no_such_pass"], "ab", [1], None, ["\udc80"]]),
    "reference_only": ([True, False], [None, 1]),
    "tune": ([False], [True, "no"]),
    "plan_cache_dir": ([None, "", work_path("plans")],
                       [work_path("plan_file"), work_path("a/b/c"), "x\0y", 5, "\udc80"]),
    "max_plans": ([64, 1], [0, -1, 2**64, "64", None]),
    "cuda_graph": ([False], [True, None]),
    "pinned_staging": ([True, False], [None]),
    "share_weights": ([True, False], [None, 2]),
}
with open(work_path("plan_file"), "w") as _f:
    _f.write("not a folder")


def op_session(fdp):
    sp = pick_spec(fdp)
    model, good = gen_model(fdp, sp)
    kwargs = {}
    for name, (ok_values, bad_values) in OPTIONS.items():
        r = fdp.ConsumeIntInRange(0, 7)
        if r == 1:
            kwargs[name] = fdp.PickValueInList(ok_values)
        elif r == 2:
            kwargs[name] = fdp.PickValueInList(bad_values)
            good = False
        elif r == 3 and name in ("device", "precision", "plan_cache_dir"):
            kwargs[name] = gen_text(fdp)
            good = False
    if fdp.ConsumeIntInRange(0, 15) == 15:
        kwargs["no_such_option"] = 1
        good = False
    ok, s = call("Session", kiln.Session, model, must=good, **kwargs)
    if not ok:
        return
    for prop in ("inputs", "outputs", "model_metadata", "metadata", "device"):
        call(prop, getattr, s, prop)
    call("repr", repr, s)
    call("stats", s.stats)
    feeds = gen_feeds(fdp, sp)
    low = kwargs.get("precision", "fp32") != "fp32"
    ok, out = call("run", s.run, feeds, must=well_formed(sp, feeds) and not low and good)
    if ok and same_names(s, sp):
        check(sp, feeds, out, tol=0.02 if low else 0.0)


def same_names(s, sp):
    """Whether a session has the spec's inputs and outputs (a mangled model may not)."""
    try:
        return ([i.name for i in s.inputs], [o.name for o in s.outputs]) == (sp.inputs,
                                                                              sp.outputs)
    except ALLOWED:
        return False


def op_batcher(fdp):
    sp = spec("add", fdp.PickValueInList(["float32", "int64"]),
              fdp.PickValueInList(["sym", "fixed"]))
    kw = {k: fdp.PickValueInList(v) for k, v in {
        "max_batch": [32, 1, 2, 0, -1, 2**31], "max_queue_delay_us": [0, 100, 2000, -1],
        "preferred_sizes": [(), [2], [0], [-1], [4, 2], "2", [2**40]],
        "max_queue": [1024, 1, 0, -1, 2**64], "merge": [True, False, None]}.items()
        if fdp.ConsumeBool()}
    ok, b = call("Batcher", kiln.Batcher, default_session("add", sp.dtype, sp.decl), **kw)
    if not ok:
        return
    try:
        feeds = gen_feeds(fdp, sp)
        ok, out = call("Batcher.infer", b.infer, feeds)
        if ok:
            check(sp, feeds, out)
        b.stats()
    finally:
        b.close()


def op_quantize(fdp):
    sp = spec("mm")
    cal = {}
    n = fdp.PickValueInList([4, 1, 2, 3, 0, 5])  # samples: the same for both inputs, mostly
    for name in sp.inputs:
        if fdp.ConsumeIntInRange(0, 7) != 7:
            decl = [n, 4] if name == "A" else [n, 3]
            cal[name] = gen_value(fdp, "float32", decl if fdp.ConsumeIntInRange(0, 7) != 7
                                  else ["N", decl[1]])
    if fdp.ConsumeIntInRange(0, 7) == 7:
        cal[gen_name(fdp, ["A", "B", "C"])] = gen_value(fdp, "float32", None)
    if fdp.ConsumeIntInRange(0, 15) == 15:
        cal = fdp.PickValueInList([list(cal.items()), None, "A"])
    # The pipeline's other forms of calibration data: tensor files by input name (NAME=FILE), a
    # single path (refused: the model has two inputs), a file that does not exist.
    form = fdp.ConsumeIntInRange(0, 7) if isinstance(cal, dict) else 0
    if form in (5, 6):
        files = []
        for name, v in cal.items():
            path = work_path(f"cal_{name}.npy")
            try:
                a = as_numpy(v)
                if a.size > 1 << 20:  # the 2**40-element views: not written out
                    continue
                np.save(path, a, allow_pickle=False)
            except Exception:  # noqa: BLE001 (not every generated value is an ndarray)
                continue
            files.append(f"{name}={path}")
        cal = files if form == 5 else (files[0].split("=", 1)[1] if files else "none.npy")
    elif form == 7:
        cal = [work_path("no_such_file.npy")]

    def raising_progress(kind, text):
        raise ValueError("progress callback raised")

    kw = {k: fdp.PickValueInList(v) for k, v in {
        "method": ["percentile", "minmax", "entropy", "mse", "", "bogus", None],
        "percentile": [99.99, 100.0, 0.0, -1.0, float("nan"), 1e300, "99"],
        "batch": [32, 1, 2, 0, -1, 2**40, None], "keep_float": [(), ["MatMul_0"], ["nope"], "ab"],
        "quantize_all": [False, True], "bias_correction": [True, False],
        "channel_activations": [False, True], "threads": [None, 1, 0, -1, 2**31],
        "samples": [None, 1, 2, 0, -1, 2**40, "3"],
        "max_drop": [None, 0.0, 100.0, -1.0, float("nan"), float("inf"), "1"],
        "labels": [None, np.array([0, 1, 2, 0, 1], np.int64), np.zeros(2, np.float32),
                   np.zeros((2, 2), np.int32), work_path("no_labels.npy"), 7],
        "eval_samples": [1000, 1, 0, -1, 2**40],
        "compare": [False, True, "yes"],
        "cache": [None, work_path("qcache.json"), work_path("no/such/dir/c.json"), "", 5],
        "trt_cache": [None, work_path("trt.txt"), work_path("no/such/dir/t.txt")],
        "recipe": [None, "scale01", "bogus"],
        "progress": [None, lambda kind, text: None, raising_progress, "not callable"]}.items()
        if fdp.ConsumeBool()}
    ok, _ = call("quantize", kiln.quantize, sp.path, work_path("quantized.onnx"), cal, **kw)
    if ok and isinstance(cal, dict):  # kiln reads each input's samples by rows: they must agree
        rows = {as_numpy(v).shape[:1] for v in cal.values()}
        if len(rows) != 1 or rows == {()}:
            raise Finding(f"quantize took calibration arrays of first dims {rows}")


def op_image_decoder(fdp):
    recipe = fdp.PickValueInList(["", "torchvision-imagenet", "scale01", "fashion-mnist",
                                  "paddleocr", "no-such-recipe", work_path("r.json"), 5, None])
    if fdp.ConsumeIntInRange(0, 3) == 3:
        dims = [fdp.PickValueInList([None, -1, 0, 1, 3, 8, 28, 224, 2**31, 2**40, -7, "x", 2.5])
                for _ in range(fdp.ConsumeIntInRange(0, 5))]
    else:
        dims = fdp.PickValueInList([[None, 3, 224, 224], [1, 1, 28, 28], [None, 3, None, None],
                                    [-1, 3, 32, 32], [2, 3, 8, 8], [1, 1, 4, 4], None, "abcd"])
    threads = fdp.PickValueInList([1, 2, 0, -1, "2", None, 2**31])
    ok, d = call("ImageDecoder", kiln.ImageDecoder, recipe, dims, threads)
    if not ok:
        return
    n = fdp.ConsumeIntInRange(0, 3)
    if fdp.ConsumeBool():
        images = [fdp.PickValueInList([lambda: fdp.ConsumeBytes(64),
                                       lambda: bytearray(fdp.ConsumeBytes(32)),
                                       lambda: memoryview(fdp.ConsumeBytes(16)),
                                       lambda: np.frombuffer(fdp.ConsumeBytes(32).ljust(2, b"\0"),
                                                             np.uint8)[::2],
                                       lambda: gen_text(fdp), lambda: None,
                                       lambda: np.zeros((2, 2), np.float32)])() for _ in range(n)]
        ok, res = call("ImageDecoder.decode", d.decode, images)
    else:
        images = [gen_value(fdp, "uint8", [None, None, 3] if fdp.ConsumeBool() else [None, None])
                  for _ in range(n)]
        ok, res = call("ImageDecoder.transform", d.transform, images)
    if ok:
        batch, errors = res
        if batch.shape != (n, *d.sample_shape) or len(errors) != n:
            raise Finding(f"ImageDecoder: {batch.shape} and {len(errors)} errors for {n} images "
                          f"of {d.sample_shape}")


def op_top_k(fdp):
    scores = gen_value(fdp, "float32", ["n", "c"])
    k = fdp.PickValueInList([1, 3, 5, 0, -1, 2**31 - 1, 2**31, "3", 2.5, None])
    ok, res = call("top_k", kiln.top_k, scores, k)
    if ok:
        idx, prob = res
        s = as_numpy(scores)
        kk = min(int(k), s.shape[1])
        if idx.shape != (s.shape[0], kk) or prob.shape != idx.shape or (
                idx.size and (idx.min() < 0 or idx.max() >= s.shape[1])):
            raise Finding(f"top_k of {s.shape}, k={k}: {idx.shape} {idx!r}")


def op_ort(fdp):
    sp = pick_spec(fdp)
    model, good = gen_model(fdp, sp)
    providers = fdp.PickValueInList([None, ["CPUExecutionProvider"], [], ["NoSuchProvider"],
                                     "CPUExecutionProvider", [("CPUExecutionProvider", {})]])
    ok, sess = call("ort.InferenceSession", kiln.ort.InferenceSession, model, providers=providers)
    if not ok:
        return
    feeds = gen_feeds(fdp, sp)
    names = fdp.PickValueInList([None, sp.outputs[:1], sp.outputs, ["nope"], "C", [1], []])
    ok, out = call("ort run", sess.run, names, feeds)
    if ok and [i.name for i in sess.get_inputs()] == sp.inputs and \
            [o.name for o in sess.get_outputs()] == sp.outputs:
        want_names = sp.outputs if not names else names
        if not isinstance(out, list) or len(out) != len(want_names):
            raise Finding(f"ort run gave {type(out).__name__} of {len(out)} for {want_names}")
        if sp.kind in ("add", "and"):
            check(sp, feeds, dict(zip(want_names, out)), names=want_names)


OPS = ([op_run] * 6 + [op_run_into, op_prepare, op_describe_plan, op_bench_trace] +
       [op_session] * 3 + [op_batcher, op_quantize, op_image_decoder, op_top_k, op_ort])


SEEN = set()


def TestOneInput(data):  # noqa: N802: atheris's name
    fdp = atheris.FuzzedDataProvider(data)
    try:
        fdp.PickValueInList(OPS)(fdp)
    except Finding as e:
        # KILN_FUZZ_CONTINUE=DIR (a survey, not a check): each kind of finding printed once and
        # its first input written to DIR, and the run goes on.
        survey = os.environ.get("KILN_FUZZ_CONTINUE")
        if not survey:
            raise
        key = str(e).split(":")[0] + ":" + str(e).split(":")[1][:60] if ":" in str(e) else str(e)
        if key not in SEEN:
            SEEN.add(key)
            print(f"FINDING {len(SEEN)}: {str(e)[:600]}", flush=True)
            with open(os.path.join(survey, f"finding-{len(SEEN)}"), "wb") as f:
                f.write(data)


def main():
    # The cached sessions go before the interpreter does (nanobind reports live instances).
    atexit.register(default_session.cache_clear)
    # This file's functions are instrumented too (kiln's modules were at import).
    for name, obj in list(globals().items()):
        if inspect.isfunction(obj) and obj.__module__ == __name__ and name != "main":
            globals()[name] = atheris.instrument_func(obj)
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
