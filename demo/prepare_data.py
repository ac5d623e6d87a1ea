#!/usr/bin/python3
"""Write the Fashion-MNIST test set as .npy files for kiln.

usage: /usr/bin/python3 demo/prepare_data.py OUTDIR
Writes OUTDIR/images.npy (float32 [10000,1,28,28], normalised (x/255 - 0.2860)/0.3530)
and OUTDIR/labels.npy (int64 [10000]).
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fmnist_data import DATA_DIR, load_split, normalize  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("outdir")
    p.add_argument("--data-dir", default=DATA_DIR)
    a = p.parse_args()
    images, labels = load_split("t10k", a.data_dir)
    x = normalize(images)
    y = np.ascontiguousarray(labels, dtype=np.int64)
    os.makedirs(a.outdir, exist_ok=True)
    np.save(os.path.join(a.outdir, "images.npy"), x)
    np.save(os.path.join(a.outdir, "labels.npy"), y)
    print(f"wrote {a.outdir}/images.npy {x.dtype} {list(x.shape)}, "
          f"{a.outdir}/labels.npy {y.dtype} {list(y.shape)}")


if __name__ == "__main__":
    main()
