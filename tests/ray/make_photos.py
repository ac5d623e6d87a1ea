#!/usr/bin/python3
"""Photos for the Ray tests and benchmark, derived from the real photographs Debian's
python3-skimage ships (astronaut, chelsea, coffee, rocket, motorcycle, hubble, retina, ihc).

usage: make_photos.py OUTDIR COUNT [--sizes 640x480,1024x768] [--corrupt K] [--seed S]

Each photo: a seeded random crop of a source at the size's aspect ratio, resized (Lanczos) to one
of --sizes, flipped at random, with mild noise (sigma 3), saved as JPEG (quality 75-95) or, one in
ten, PNG; in subfolders of 100. --corrupt K adds K bad files under bad/, cycling through: a
truncated JPEG, an empty file, a text file named .jpg, a PNG with its data cut, a JPEG of zeros
after the header. Prints the number of files written. Deterministic for a seed.
"""
import argparse
import os

import numpy as np
from PIL import Image

SKIMAGE_DATA = "/usr/lib/python3/dist-packages/skimage/data"
PHOTOS = ["astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "motorcycle_left.png",
          "motorcycle_right.png", "hubble_deep_field.jpg", "retina.jpg", "ihc.png"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("count", type=int)
    p.add_argument("--sizes", default="640x480,1024x768")
    p.add_argument("--corrupt", type=int, default=0)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    sizes = [tuple(int(v) for v in s.split("x")) for s in a.sizes.split(",")]
    rng = np.random.default_rng(a.seed)
    sources = [Image.open(os.path.join(SKIMAGE_DATA, n)).convert("RGB") for n in PHOTOS]
    written = 0
    for i in range(a.count):
        src = sources[i % len(sources)]
        w, h = sizes[rng.integers(len(sizes))]
        if rng.random() < 0.2:
            w, h = h, w  # portrait
        sw, sh = src.size
        scale = rng.uniform(0.5, 1.0)
        cw = min(sw, int(sh * scale * w / h))
        ch = min(sh, int(cw * h / w))
        x0 = int(rng.integers(0, sw - cw + 1))
        y0 = int(rng.integers(0, sh - ch + 1))
        img = src.crop((x0, y0, x0 + cw, y0 + ch)).resize((w, h), Image.LANCZOS)
        if rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        arr = np.asarray(img).astype(np.float32) + rng.normal(0, 3, (h, w, 3))
        img = Image.fromarray(arr.clip(0, 255).astype(np.uint8))
        folder = os.path.join(a.out, f"{i // 100:04d}")
        os.makedirs(folder, exist_ok=True)
        if i % 10 == 9:
            img.save(os.path.join(folder, f"photo{i:06d}.png"), compress_level=1)
        else:
            img.save(os.path.join(folder, f"photo{i:06d}.jpg"), quality=int(rng.integers(75, 96)))
        written += 1
    if a.corrupt:
        bad = os.path.join(a.out, "bad")
        os.makedirs(bad, exist_ok=True)
        jpeg = open(os.path.join(a.out, "0000", "photo000000.jpg"), "rb").read()
        png = open(os.path.join(a.out, "0000", "photo000009.png"), "rb").read() \
            if a.count > 9 else b"\x89PNG\r\n\x1a\n"
        for k in range(a.corrupt):
            kind = k % 5
            name = os.path.join(bad, f"bad{k:04d}" + (".png" if kind in (1, 3) else ".jpg"))
            data = [jpeg[:len(jpeg) // 3], b"", b"not an image at all\n", png[:len(png) // 2],
                    jpeg[:300] + bytes(2000)][kind]
            open(name, "wb").write(data)
            written += 1
    print(written)


if __name__ == "__main__":
    main()
