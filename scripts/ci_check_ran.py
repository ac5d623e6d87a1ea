#!/usr/bin/env python3
"""Fails a CI run in which a selected CTest test did not run.

usage: ci_check_ran.py JUNIT.xml [...]   (the files `ctest --output-junit` wrote)

CTest counts a test that exits with its SKIP_RETURN_CODE, or whose executable is missing, as "not
run" and still exits 0, so a run could be green with checks that never ran. Under CI the scripts
already turn their skips into failures (tests/skip.sh, tests/pyenv/check_venv.py: KILN_REQUIRE_ALL);
this is the second lock: every testcase must have status "run" (or "fail", which CTest itself
reports). GoogleTest cases skipped inside a binary that ran (GTEST_SKIP: a CPU without bf16, say)
are listed with their reason, not failed: the binaries decide which of theirs are legitimate.
Exit 0 when every test ran, 1 otherwise (each one named with CTest's reason and its output's
last line).
"""
import re
import sys
import xml.etree.ElementTree as ET


def main(paths):
    ran, not_run, gtest_skips = 0, [], []
    for path in paths:
        root = ET.parse(path).getroot()
        for case in root.iter("testcase"):
            name, status = case.get("name"), case.get("status")
            out = case.findtext("system-out") or ""
            if status in ("run", "fail"):
                ran += 1
            else:
                skipped = case.find("skipped")
                why = skipped.get("message") if skipped is not None else status
                last = [line for line in out.splitlines() if line.strip()][-1:] or [""]
                not_run.append(f"{name}: {status} ({why}) {last[0][:300]}")
            for m in re.finditer(r"^\[  SKIPPED \] (\S+\.\S+)", out, re.M):
                gtest_skips.append(f"{name}: {m.group(1)}")
    print(f"ci_check_ran: {ran} tests ran, {len(not_run)} did not")
    for s in sorted(set(gtest_skips)):
        print(f"  gtest case skipped inside {s}")
    for n in not_run:
        print(f"  NOT RUN {n}")
    if ran == 0:
        print("ci_check_ran: FAILED: no test ran")
        return 1
    return 1 if not_run else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
