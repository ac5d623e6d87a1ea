#!/usr/bin/python3
"""Makes the image folders `kiln run --images` is tested on (tests/cli/image_job_test.sh).

Usage: make_job_images.py OUTDIR

OUTDIR/imgs: 36 small gray and RGB JPEG/PNG files (some in a subfolder, some with upper-case
extensions), plus bad ones: a truncated JPEG, an empty .png, a text file named x.jpg; and
notes.txt, which the walk must skip. OUTDIR/imgs.list lists the same images (relative paths).
OUTDIR/many: 1500 links to one 640x480 JPEG, for the kill-and-resume check (slow enough at
--batch 1 to be killed mid-job).
"""
import os
import sys

import numpy as np
from PIL import Image

out = sys.argv[1]
rng = np.random.default_rng(7)
imgs = os.path.join(out, "imgs")
os.makedirs(os.path.join(imgs, "sub"), exist_ok=True)
names = []
for i in range(36):
    h, w = 20 + i, 24 + 2 * i
    shape = (h, w) if i % 2 else (h, w, 3)
    arr = (rng.random(shape) * 255).astype(np.uint8)
    ext = [".jpg", ".png", ".JPEG", ".PNG"][i % 4]
    rel = ("sub/" if i % 3 == 0 else "") + f"img{i:02d}{ext}"
    fmt = "PNG" if "png" in ext.lower() else "JPEG"
    Image.fromarray(arr).save(os.path.join(imgs, rel), format=fmt)
    names.append(rel)
jpeg = open(os.path.join(imgs, "img04.jpg"), "rb").read()
open(os.path.join(imgs, "corrupt.jpg"), "wb").write(jpeg[: len(jpeg) // 2])
open(os.path.join(imgs, "empty.png"), "wb").close()
open(os.path.join(imgs, "x.jpg"), "w").write("this is a text file, not a JPEG\n")
open(os.path.join(imgs, "notes.txt"), "w").write("not an image\n")
with open(os.path.join(out, "imgs.list"), "w") as f:
    f.write("# the images of imgs/, relative to this file\n")
    for rel in names + ["corrupt.jpg", "empty.png", "x.jpg"]:
        f.write(f"imgs/{rel}\n")

many = os.path.join(out, "many")
os.makedirs(many, exist_ok=True)
y, x = np.mgrid[0:480, 0:640]
photo = np.stack([(x * 0.4) % 256, (y * 0.5) % 256, ((x + y) * 0.3) % 256], -1)
photo = (photo + rng.normal(0, 20, photo.shape)).clip(0, 255).astype(np.uint8)
src = os.path.join(many, "source.jpg")
Image.fromarray(photo).save(src, quality=92)
for i in range(1500):
    os.symlink("source.jpg", os.path.join(many, f"m{i:04d}.jpg"))
