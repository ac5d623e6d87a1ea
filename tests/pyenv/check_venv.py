"""The virtual environment of the tests that need packages from the Python package index.

Made with Debian's python3 (`--system-site-packages`, so Debian's numpy and torch stay visible) at
${XDG_CACHE_HOME:-~/.cache}/kiln/check-venv (or $KILN_CHECK_VENV), filled with PINS (every package pinned, wheels
only, no dependency resolution), and remade when PINS change (a stamp file holds them).
`python_or_skip()` returns its interpreter, or skips (below) when the index cannot be reached;
any other pip failure (a pin that does not exist, a missing wheel, a full disk) fails (exit 1).

The skip policy of every check that can skip (`skip()`): outside CI it prints "SKIP: <reason>" and
exits 77, which CTest counts as "not run". Under CI (`CI=true`, or `KILN_REQUIRE_ALL=1`, which
`.ci/run` sets) a skip is a failure: it prints "FAIL: ... would skip under CI: <reason>" and exits
1, so a green CI run means every check ran. tests/skip.sh is the same policy for shell scripts.
"""
import fcntl
import os
import subprocess
import sys

PINS = [
    "onnx==1.19.1",  # the pinned onnx: schemas up to opset 24, node tests, version_converter
    "protobuf==4.25.8",  # onnx >= 4.25.1, onnxruntime >= 4.25.8 (Debian's is 4.21.12)
    "typing_extensions==4.12.2",
    "ml_dtypes==0.5.1",
    "onnxconverter-common==1.16.0",  # float16 conversion (both forms)
    "onnxruntime==1.32.0",  # the anchor on converted models (as bench/requirements.txt)
    "flatbuffers==25.12.19",
    # NVIDIA Triton's client, against `kiln serve` (tests/serving/tritonclient_check.py); 2.50.0's
    # wheel also carries the perf_analyzer binary (bench/serve_perf_analyzer.sh)
    "tritonclient==2.50.0",
    "grpcio==1.68.1",
    "geventhttpclient==2.0.2",  # tritonclient 2.50 wants <= 2.0.2
    "gevent==24.11.1",
    "greenlet==3.1.1",
    "zope.event==5.0",
    "zope.interface==7.2",
    "python-rapidjson==1.20",
    "brotli==1.1.0",
    "urllib3==2.2.3",  # tritonclient wants >= 2.0.7 (Debian's is 1.26)
    "certifi==2024.8.30",
    # The Python package: nanobind builds its extension (scripts/build.sh takes its CMake folder
    # from here), pytest runs python/tests.
    "nanobind==2.9.2",
    "pytest==8.3.5",
    "pluggy==1.5.0",
    "iniconfig==2.0.0",
    "packaging==24.2",
]

# kiln.ray's venv (${XDG_CACHE_HOME:-~/.cache}/kiln/ray-venv: tests/ray/ray_test.py,
# bench/ray_bench.py): Ray Data and what it needs beyond Debian's packages (numpy 1.24, PyYAML,
# requests, protobuf, attrs, dateutil, pytz, psutil stay Debian's).
RAY_PINS = [
    "ray==2.60.0",
    "pandas==2.2.3",  # ray[data] wants >= 2.2.3; 2.2.3 still takes Debian's numpy 1.24
    "pyarrow==18.1.0",
    "fsspec==2026.9.0",
    "tzdata==2026.6",
    "click==8.1.8",
    "filelock==3.16.1",
    "jsonschema==4.23.0",
    "jsonschema-specifications==2024.10.1",
    "referencing==0.35.1",
    "rpds-py==0.22.3",
    "msgpack==1.1.0",
    "packaging==24.2",
]


def ray_venv():
    """kiln.ray's venv (made when missing): its interpreter, or a skip."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return python_or_skip(RAY_PINS, os.path.join(cache, "kiln", "ray-venv"), system_site=True)


# The Python API fuzzer's venv (${XDG_CACHE_HOME:-~/.cache}/kiln/fuzz-venv:
# tests/fuzz/python_args_fuzz.py): atheris (3.0.0 is the newest release on the index, a cp311
# manylinux wheel with libFuzzer inside: no clang build) and onnx to build the fuzzed models;
# numpy (1.24) and torch stay Debian's.
FUZZ_PINS = [
    "atheris==3.0.0",
    "onnx==1.19.1",
    "protobuf==4.25.8",
    "typing_extensions==4.12.2",
    "ml_dtypes==0.5.1",
]


def fuzz_venv():
    """The Python API fuzzer's venv (made when missing): its interpreter, or a skip."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return python_or_skip(FUZZ_PINS, os.path.join(cache, "kiln", "fuzz-venv"), system_site=True)


# pip's words when it never reached the index (the network, DNS or a proxy failed), as opposed to
# reaching it and failing (no such version, no wheel for this platform, a full disk).
UNREACHABLE_MARKS = ("Failed to establish a new connection", "Temporary failure in name resolution",
                     "Name or service not known", "Network is unreachable", "Connection refused",
                     "ConnectTimeoutError", "Read timed out", "ProxyError", "Max retries exceeded",
                     "No route to host")


def require_all():
    """True under CI: every check must run, so a skip fails."""
    return os.environ.get("KILN_REQUIRE_ALL") == "1" or os.environ.get("CI", "").lower() == "true"


def skip(reason):
    """Skips the calling check (exit 77) with the reason, or fails it (exit 1) under CI."""
    if require_all():
        print(f"FAIL: this check would skip, and under CI (KILN_REQUIRE_ALL=1 or CI=true) a skip "
              f"is a failure: {reason}", flush=True)
        sys.exit(1)
    print(f"SKIP: {reason}", flush=True)
    sys.exit(77)


def unreachable(pip_stderr):
    """True when pip's error says it could not reach the index at all."""
    return any(m in pip_stderr for m in UNREACHABLE_MARKS)


def python_or_skip(pins=None, venv=None, system_site=True):
    """The venv's interpreter, made with `pins` (default PINS) at `venv` (default: see above),
    seeing Debian's packages unless system_site is False."""
    pins = PINS if pins is None else pins
    if venv is None:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
        venv = os.environ.get("KILN_CHECK_VENV", os.path.join(cache, "kiln", "check-venv"))
    py = os.path.join(venv, "bin", "python")
    stamp = os.path.join(venv, ".pins")
    if os.path.exists(stamp) and open(stamp).read() == " ".join(pins):
        return py
    # CTest runs several checks at once (-j2): one makes the venv while the others wait on the
    # lock (two concurrent `venv --clear` + pip runs broke each other on a fresh machine), then
    # they see its stamp.
    os.makedirs(os.path.dirname(os.path.abspath(venv)), exist_ok=True)
    with open(os.path.abspath(venv) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(stamp) and open(stamp).read() == " ".join(pins):
            return py
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--clear", venv]
                       + (["--system-site-packages"] if system_site else []), check=True)
        r = subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--only-binary=:all:"]
                           + pins, capture_output=True, text=True)
        if r.returncode != 0:
            if unreachable(r.stderr):
                skip("cannot reach the package index to install the pinned packages: "
                     + r.stderr[-800:])
            print("FAIL: pip could not install the pinned packages (the index answered; a pin, "
                  "a wheel or the disk is at fault):", r.stderr[-1500:], flush=True)
            sys.exit(1)
        open(stamp, "w").write(" ".join(pins))
    return py


def reexec_in_venv():
    """Runs the calling script again inside the venv (once); returns when already inside."""
    if os.environ.get("KILN_IN_CHECK_VENV") == "1":
        return
    py = python_or_skip()
    env = dict(os.environ, KILN_IN_CHECK_VENV="1")
    sys.exit(subprocess.run([py] + sys.argv, env=env).returncode)


if __name__ == "__main__":
    # check_venv.py unreachable LOG: exit 0 when pip's log says the index was never reached.
    if len(sys.argv) == 3 and sys.argv[1] == "unreachable":
        sys.exit(0 if unreachable(open(sys.argv[2], errors="replace").read()) else 1)
    # check_venv.py nanobind-dir: the pinned nanobind's CMake folder (scripts/build.sh).
    if len(sys.argv) == 2 and sys.argv[1] == "nanobind-dir":
        venv_py = python_or_skip()
        sys.exit(subprocess.run([venv_py, "-m", "nanobind", "--cmake_dir"]).returncode)
    # check_venv.py python: the venv's interpreter (made when missing).
    if len(sys.argv) == 2 and sys.argv[1] == "python":
        print(python_or_skip())
        sys.exit(0)
    # check_venv.py fuzz-python: the fuzz venv's interpreter (scripts/fuzz.sh python).
    if len(sys.argv) == 2 and sys.argv[1] == "fuzz-python":
        print(fuzz_venv())
        sys.exit(0)
    sys.exit("usage: check_venv.py unreachable PIP_LOG | nanobind-dir | python | fuzz-python")
