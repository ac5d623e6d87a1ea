#!/usr/bin/env python3
"""Runs python/tests with pytest against the package a build assembled.

usage: run_pytest.py BUILD_PYTHON_DIR [--numpy2] [pytest args...]

Default: in the pinned check venv (tests/pyenv/check_venv.py: Debian's numpy 1.24 and torch
visible, onnxruntime and pytest pinned). --numpy2: in a venv without Debian's packages, holding
only numpy 2.2.6 and pytest, so the package is shown to work with numpy 2 and without system site
packages (the tests needing onnxruntime, torch or PIL skip themselves there; the outside
applications of test_ort_apps.py, which make their own venv, run in the default form only). The index
unreachable: a skip (check_venv.skip, a failure under CI).
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "pyenv"))
import check_venv  # noqa: E402

NUMPY2_PINS = ["numpy==2.2.6", "pytest==8.3.5", "pluggy==1.5.0", "iniconfig==2.0.0",
               "packaging==24.2"]


def main():
    pkg = os.path.abspath(sys.argv[1])
    args = sys.argv[2:]
    if not os.path.isfile(os.path.join(pkg, "kiln", "__init__.py")):
        print(f"FAIL: no kiln package at {pkg} (build with scripts/build.sh)")
        return 1
    if args[:1] == ["--numpy2"]:
        args = args[1:]
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
        py = check_venv.python_or_skip(NUMPY2_PINS, os.path.join(cache, "kiln", "numpy2-venv"),
                                       system_site=False)
        # The outside applications run in their own venv (test_ort_apps.py): once is enough.
        args = ["--ignore", os.path.join(HERE, "test_ort_apps.py")] + args
    else:
        py = check_venv.python_or_skip()
    env = dict(os.environ, PYTHONPATH=pkg, PYTHONDONTWRITEBYTECODE="1")
    cmd = [py, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", HERE] + args
    print("+", " ".join(cmd), flush=True)
    rc = subprocess.run(cmd, env=env, cwd=HERE).returncode
    out = subprocess.run([py, "-c", "import numpy, kiln; print('numpy', numpy.__version__, "
                          "'kiln', kiln.__version__, kiln.__file__)"], env=env,
                         capture_output=True, text=True)
    print(out.stdout.strip() or out.stderr.strip())
    return rc


if __name__ == "__main__":
    sys.exit(main())
