#!/usr/bin/python3
"""Write the Fashion-MNIST test set as PNG files, one folder per class, for `kiln run --images`.

usage: /usr/bin/python3 demo/export_images.py OUTDIR
Writes OUTDIR/images/<class index>_<class>/<test index>.png (28x28 greyscale, lossless, the
dataset's own pixels) and OUTDIR/labels.txt (the class names, one per line, in label order).
"""
import argparse
import os
import sys

from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fmnist_data import DATA_DIR, load_split  # noqa: E402

CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
           "Bag", "Ankle boot"]


def folder(label):
    return f"{label}_" + CLASSES[label].lower().replace("/", "-").replace(" ", "-")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("outdir")
    p.add_argument("--data-dir", default=DATA_DIR)
    a = p.parse_args()
    images, labels = load_split("t10k", a.data_dir)
    for c in range(len(CLASSES)):
        os.makedirs(os.path.join(a.outdir, "images", folder(c)), exist_ok=True)
    for i, (img, label) in enumerate(zip(images, labels)):
        Image.fromarray(img).save(os.path.join(a.outdir, "images", folder(int(label)), f"{i:05d}.png"))
    with open(os.path.join(a.outdir, "labels.txt"), "w") as f:
        f.write("\n".join(CLASSES) + "\n")
    print(f"wrote {len(images)} PNG files under {a.outdir}/images and {a.outdir}/labels.txt")


if __name__ == "__main__":
    main()
