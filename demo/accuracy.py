#!/usr/bin/python3
"""Print top-1 accuracy of logits against labels.

usage: /usr/bin/python3 demo/accuracy.py LOGITS_NPY LABELS_NPY
LOGITS_NPY: float [N,10]; LABELS_NPY: integer [N]. Exits 2 on shape mismatch.
"""
import argparse
import sys

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("logits")
    p.add_argument("labels")
    a = p.parse_args()
    logits = np.load(a.logits)
    labels = np.load(a.labels)
    if logits.ndim != 2 or labels.ndim != 1 or logits.shape[0] != labels.shape[0]:
        print(f"shape mismatch: logits {list(logits.shape)}, labels {list(labels.shape)}",
              file=sys.stderr)
        return 2
    if not np.all(np.isfinite(logits)):
        print(f"warning: {int((~np.isfinite(logits)).sum())} non-finite logits", file=sys.stderr)
    correct = int((logits.argmax(axis=1) == labels).sum())
    n = labels.shape[0]
    print(f"top-1 accuracy: {100.0 * correct / n:.2f}% ({correct}/{n})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
