#!/usr/bin/python3
"""Compare two .npy files elementwise, numpy.allclose-style.

usage: /usr/bin/python3 tests/models/compare_npy.py ACTUAL.npy EXPECTED.npy [--rtol 1e-3] [--atol 1e-4]

Passes when shapes and dtypes are exactly equal and |actual - expected| <= atol + rtol*|expected|
for every element (NaN never matches, as in numpy.allclose with equal_nan=False).
Prints one summary line: max abs error, max rel error (over non-zero expected values), the worst
element (largest |actual-expected| / (atol + rtol*|expected|), shown as 'worst err/tol'; > 1 fails)
with its index and values, and the count of elements out of tolerance.
Exit status: 0 pass, 1 values out of tolerance, 2 shape/dtype mismatch or unreadable file.
"""
import argparse
import sys

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("actual")
    p.add_argument("expected")
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol", type=float, default=1e-4)
    a = p.parse_args()
    try:
        x = np.load(a.actual, allow_pickle=False)
        y = np.load(a.expected, allow_pickle=False)
    except (OSError, ValueError) as e:
        print(f"FAIL: cannot load: {e}")
        return 2
    if x.shape != y.shape or x.dtype != y.dtype:
        print(f"FAIL: shape/dtype mismatch: {a.actual} {x.dtype}{list(x.shape)} vs "
              f"{a.expected} {y.dtype}{list(y.shape)}")
        return 2
    if x.size == 0:
        print("OK: empty arrays")
        return 0
    if x.dtype == np.bool_ or not np.issubdtype(x.dtype, np.number):
        bad = x != y
        nbad = int(bad.sum())
        if nbad:
            idx = np.unravel_index(int(np.argmax(bad)), x.shape)
            print(f"FAIL: {nbad}/{x.size} elements differ, first at {tuple(int(i) for i in idx)}")
            return 1
        print(f"OK: {x.size} elements equal")
        return 0

    xf = x.astype(np.float64)
    yf = y.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        abs_err = np.abs(xf - yf)
        tol = a.atol + a.rtol * np.abs(yf)
        ok = abs_err <= tol  # False wherever a NaN is involved
        # An element matching exactly (e.g. both +inf) is fine, as in numpy.isclose.
        ok |= (xf == yf)
        # Relative error over elements whose expected value is non-zero.
        rel_err = np.where(yf != 0, abs_err / np.abs(yf), np.nan)
        # Worst element: largest error relative to its allowed tolerance; NaN/inf mismatches
        # count as worst.
        score = np.where(ok, abs_err / tol, np.where(np.isfinite(abs_err), abs_err / tol, np.inf))
    nbad = int((~ok).sum())
    n_nonfinite = int((~np.isfinite(xf)).sum())
    finite = np.isfinite(abs_err)
    max_abs = float(abs_err[finite].max()) if finite.any() else float("nan")
    finite_rel = np.isfinite(rel_err)
    max_rel = float(rel_err[finite_rel].max()) if finite_rel.any() else float("nan")
    worst = np.unravel_index(int(np.argmax(score)), x.shape)
    worst_t = tuple(int(i) for i in worst)
    ratio = float(np.max(score))
    msg = (f"max abs err {max_abs:.3g}, max rel err {max_rel:.3g}, worst err/tol {ratio:.3g} "
           f"at {worst_t} (actual {x[worst]!r}, expected {y[worst]!r}), "
           f"{nbad}/{x.size} out of tolerance (rtol {a.rtol:g}, atol {a.atol:g})")
    if n_nonfinite:
        msg += f", {n_nonfinite} non-finite in actual ({int(np.isnan(xf).sum())} NaN)"
    if nbad:
        print("FAIL: " + msg)
        return 1
    print("OK: " + msg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
