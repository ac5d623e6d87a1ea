"""The virtual environment of the tests that need packages from the Python package index.

Made with Debian's python3 (`--system-site-packages`, so Debian's numpy and torch stay visible) at
${XDG_CACHE_HOME:-~/.cache}/kiln/check-venv (or $KILN_CHECK_VENV), filled with PINS (every package pinned, wheels
only, no dependency resolution), and remade when PINS change (a stamp file holds them).
`python_or_skip()` returns its interpreter, or exits 77 (CTest skip) with the reason when the
index cannot be reached.
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
]


def python_or_skip():
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    venv = os.environ.get("KILN_CHECK_VENV", os.path.join(cache, "kiln", "check-venv"))
    py = os.path.join(venv, "bin", "python")
    stamp = os.path.join(venv, ".pins")
    if os.path.exists(stamp) and open(stamp).read() == " ".join(PINS):
        return py
    # CTest runs several checks at once (-j2): one makes the venv while the others wait on the
    # lock (two concurrent `venv --clear` + pip runs broke each other on a fresh machine), then
    # they see its stamp.
    os.makedirs(os.path.dirname(os.path.abspath(venv)), exist_ok=True)
    with open(os.path.abspath(venv) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(stamp) and open(stamp).read() == " ".join(PINS):
            return py
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", "--clear",
                        venv], check=True)
        r = subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--only-binary=:all:"]
                           + PINS, capture_output=True, text=True)
        if r.returncode != 0:
            print("SKIP: cannot install the pinned packages from the package index:",
                  r.stderr[-800:])
            sys.exit(77)
        open(stamp, "w").write(" ".join(PINS))
    return py


def reexec_in_venv():
    """Runs the calling script again inside the venv (once); returns when already inside."""
    if os.environ.get("KILN_IN_CHECK_VENV") == "1":
        return
    py = python_or_skip()
    env = dict(os.environ, KILN_IN_CHECK_VENV="1")
    sys.exit(subprocess.run([py] + sys.argv, env=env).returncode)
