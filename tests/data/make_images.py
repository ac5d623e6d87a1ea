#!/usr/bin/python3
"""Generates the data-pipeline test corpus and its references (PIL 9.4, torchvision 0.14, numpy).

Usage: make_images.py OUTDIR [--big]

Writes image files plus .npy references into OUTDIR and OUTDIR/cases.json, which data_test.cc
reads. References come from the libraries kiln must agree with: PIL's decoders and
Image.resize(BILINEAR), ImageOps.exif_transpose, and torchvision's ImageNet eval transform.
PNG variants PIL cannot write (2/4-bit gray, 16-bit RGB, Adam7 interlacing) are written by a small
PNG encoder below, with references computed from the source arrays. Real photographs come from
Debian's python3-skimage data folder when it is installed. --big adds a 4032x3024 camera-size
JPEG (made from a real photo) for the DCT-scaling accuracy and speed checks.
"""
import json
import os
import struct
import sys
import zlib

import numpy as np
from PIL import Image, ImageOps

SKIMAGE_DATA = "/usr/lib/python3/dist-packages/skimage/data"
rng = np.random.default_rng(1234)
OUT = sys.argv[1]
BIG = "--big" in sys.argv
cases = {"decode": [], "exif": [], "resize": [], "recipe": [], "bad": [], "scaled": []}


def path(name):
    return os.path.join(OUT, name)


def smooth_rgb(w, h, channels=3):
    """A smooth gradient with noise: realistic enough for JPEG, with detail for resize checks."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    planes = [
        128 + 100 * np.sin(x / (3 + 7 * c) + y / (5 + 3 * c) + c) for c in range(channels)
    ]
    img = np.stack(planes, axis=-1) + rng.normal(0, 12, (h, w, channels))
    return np.clip(img, 0, 255).astype(np.uint8)


def save_npy(name, arr):
    np.save(path(name), np.ascontiguousarray(arr))
    return name


def pil_rgb_or_l(im):
    return np.asarray(im.convert("L" if im.mode in ("L", "LA", "1", "I", "I;16") else "RGB"))


# ---------------------------------------------------------------- a minimal PNG encoder
def png_chunk(tag, data):
    c = struct.pack(">I", len(data)) + tag + data
    return c + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)


def pack_rows(arr, bit_depth):
    """arr: (h, w, c) of ints; returns filtered (type 0) scanlines for that bit depth."""
    h = arr.shape[0]
    rows = []
    for r in range(h):
        samples = arr[r].reshape(-1)
        if bit_depth == 16:
            data = samples.astype(">u2").tobytes()
        elif bit_depth == 8:
            data = samples.astype(np.uint8).tobytes()
        else:
            per = 8 // bit_depth
            padded = np.zeros(((len(samples) + per - 1) // per) * per, np.uint8)
            padded[: len(samples)] = samples
            b = np.zeros(len(padded) // per, np.uint8)
            for i in range(per):
                b |= (padded[i::per] << (8 - bit_depth * (i + 1))).astype(np.uint8)
            data = b.tobytes()
        rows.append(b"\x00" + data)
    return b"".join(rows)


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2)]


def write_png(name, arr, color_type, bit_depth, interlace=False, extra=b""):
    arr = arr if arr.ndim == 3 else arr[:, :, None]
    h, w = arr.shape[:2]
    if interlace:
        raw = b""
        for x0, y0, dx, dy in ADAM7:
            sub = arr[y0::dy, x0::dx]
            if sub.shape[0] and sub.shape[1]:
                raw += pack_rows(sub, bit_depth)
    else:
        raw = pack_rows(arr, bit_depth)
    ihdr = struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, 1 if interlace else 0)
    data = (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + extra +
            png_chunk(b"IDAT", zlib.compress(raw, 9)) + png_chunk(b"IEND", b""))
    with open(path(name), "wb") as f:
        f.write(data)
    return name


def decode_case(name, expected, note="", tol=0):
    cases["decode"].append({"file": name, "expected": save_npy(name + ".npy", expected),
                            "tolerance": tol, "note": note})


# ---------------------------------------------------------------- PNG decoding
rgb = smooth_rgb(37, 23)
Image.fromarray(rgb).save(path("rgb8.png"))
decode_case("rgb8.png", pil_rgb_or_l(Image.open(path("rgb8.png"))))
rgba = np.concatenate([rgb, rng.integers(0, 256, (23, 37, 1), dtype=np.uint8)], axis=2)
Image.fromarray(rgba, "RGBA").save(path("rgba8.png"))
decode_case("rgba8.png", np.asarray(Image.open(path("rgba8.png")).convert("RGB")), "alpha dropped")
gray = smooth_rgb(31, 17, 1)[:, :, 0]
Image.fromarray(gray, "L").save(path("gray8.png"))
decode_case("gray8.png", np.asarray(Image.open(path("gray8.png"))))
Image.fromarray(np.stack([gray, 255 - gray], -1), "LA").save(path("gray_alpha.png"))
decode_case("gray_alpha.png", np.asarray(Image.open(path("gray_alpha.png")).convert("L")))
pal = Image.fromarray(rgb).quantize(colors=50)
pal.save(path("palette.png"))
decode_case("palette.png", np.asarray(Image.open(path("palette.png")).convert("RGB")))
pal.save(path("palette_trns.png"), transparency=3)
decode_case("palette_trns.png", np.asarray(Image.open(path("palette_trns.png")).convert("RGB")),
            "tRNS dropped")
Image.fromarray(rgb).quantize(colors=4).save(path("palette2bit.png"), bits=2)
decode_case("palette2bit.png", np.asarray(Image.open(path("palette2bit.png")).convert("RGB")))
Image.fromarray(gray > 128).save(path("gray1.png"))
decode_case("gray1.png", np.asarray(Image.open(path("gray1.png")).convert("L")))
g4 = (gray >> 4).astype(np.uint8)
write_png("gray4.png", g4, 0, 4)
decode_case("gray4.png", g4 * 17, "4-bit gray scaled by 17 (PIL: same)")
rgb16 = rng.integers(0, 65536, (19, 29, 3)).astype(np.uint16)
write_png("rgb16.png", rgb16, 2, 16)
assert (np.asarray(Image.open(path("rgb16.png")).convert("RGB")) == rgb16 >> 8).all()
decode_case("rgb16.png", (rgb16 >> 8).astype(np.uint8), "16-bit: high byte, as PIL")
rgba16 = rng.integers(0, 65536, (9, 11, 4)).astype(np.uint16)
write_png("rgba16.png", rgba16, 6, 16)
decode_case("rgba16.png", (rgba16[:, :, :3] >> 8).astype(np.uint8))
g16 = rng.integers(0, 65536, (13, 7)).astype(np.uint16)
write_png("gray16_interlaced.png", g16, 0, 16, interlace=True)
decode_case("gray16_interlaced.png", (g16 >> 8).astype(np.uint8),
            "16-bit gray: high byte (PIL clips I->L to 255 instead)")
write_png("rgb_interlaced.png", rgb, 2, 8, interlace=True)
assert (np.asarray(Image.open(path("rgb_interlaced.png")).convert("RGB")) == rgb).all()
decode_case("rgb_interlaced.png", rgb, "Adam7")
write_png("ga_interlaced.png", np.stack([gray, gray // 2], -1), 4, 8, interlace=True)
decode_case("ga_interlaced.png", gray)

# ---------------------------------------------------------------- JPEG decoding
src = smooth_rgb(101, 67)
for sub, q in [(0, 95), (2, 75), (1, 85)]:  # PIL subsampling: 0=4:4:4, 1=4:2:2, 2=4:2:0
    name = f"ycc_s{sub}.jpg"
    Image.fromarray(src).save(path(name), quality=q, subsampling=sub)
    decode_case(name, np.asarray(Image.open(path(name)).convert("RGB")))
Image.fromarray(src).save(path("progressive.jpg"), quality=80, progressive=True)
decode_case("progressive.jpg", np.asarray(Image.open(path("progressive.jpg")).convert("RGB")))
Image.fromarray(src[:, :, 1]).save(path("gray.jpg"), quality=90)
decode_case("gray.jpg", np.asarray(Image.open(path("gray.jpg"))))
Image.fromarray(src).convert("CMYK").save(path("cmyk.jpg"), quality=95)
assert Image.open(path("cmyk.jpg")).mode == "CMYK"
decode_case("cmyk.jpg", np.asarray(Image.open(path("cmyk.jpg")).convert("RGB")), "Adobe CMYK")
Image.fromarray(src).save(path("restart.jpg"), quality=90, restart_marker_blocks=2)
decode_case("restart.jpg", np.asarray(Image.open(path("restart.jpg")).convert("RGB")))

# DCT-scaled decoding vs PIL's draft() (which uses libjpeg's scaling the same way).
big = smooth_rgb(400, 300)
Image.fromarray(big).save(path("scale_src.jpg"), quality=90)
for denom in (2, 4, 8):
    im = Image.open(path("scale_src.jpg"))
    im.draft("RGB", (400 // denom, 300 // denom))
    exp = np.asarray(im.convert("RGB"))
    cases["scaled"].append({"file": "scale_src.jpg", "min_width": 400 // denom,
                            "min_height": 300 // denom, "orientation": 1,
                            "expected": save_npy(f"scale_src_{denom}.npy", exp)})

# ---------------------------------------------------------------- EXIF orientation
exif_src = smooth_rgb(48, 32)
for o in range(1, 9):
    ex = Image.Exif()
    ex[0x0112] = o
    name = f"exif{o}.jpg"
    Image.fromarray(exif_src).save(path(name), quality=95, subsampling=0, exif=ex.tobytes())
    exp = np.asarray(ImageOps.exif_transpose(Image.open(path(name))).convert("RGB"))
    cases["exif"].append({"file": name, "orientation": o, "expected": save_npy(name + ".npy", exp)})
    pname = f"exif{o}.png"
    Image.fromarray(exif_src).save(path(pname), exif=ex.tobytes())
    exp = np.asarray(ImageOps.exif_transpose(Image.open(path(pname))).convert("RGB"))
    cases["exif"].append({"file": pname, "orientation": o, "expected": save_npy(pname + ".npy", exp)})
# Big-endian ("MM") EXIF written by hand: orientation 6.
mm = b"Exif\0\0MM\0*\0\0\0\x08\0\x01\x01\x12\0\x03\0\0\0\x01\0\x06\0\0\0\0\0\0"
Image.fromarray(exif_src).save(path("exif_mm6.jpg"), quality=95, subsampling=0, exif=mm)
exp = np.asarray(ImageOps.exif_transpose(Image.open(path("exif_mm6.jpg"))).convert("RGB"))
cases["exif"].append({"file": "exif_mm6.jpg", "orientation": 6,
                      "expected": save_npy("exif_mm6.jpg.npy", exp)})
# Orientation with DCT scaling: min dims are in display orientation (portrait 150x200 here).
ex = Image.Exif()
ex[0x0112] = 6
Image.fromarray(big).save(path("scale_exif6.jpg"), quality=90, exif=ex.tobytes())
im = Image.open(path("scale_exif6.jpg"))
im.draft("RGB", (100, 75))
exp = np.asarray(ImageOps.exif_transpose(im).convert("RGB"))
cases["scaled"].append({"file": "scale_exif6.jpg", "min_width": 75, "min_height": 100,
                        "orientation": 6, "expected": save_npy("scale_exif6.npy", exp)})

# ---------------------------------------------------------------- resize vs PIL
rs = smooth_rgb(97, 73)
Image.fromarray(rs).save(path("resize_src.png"))
Image.fromarray(rs[:, :, 0]).save(path("resize_gray.png"))
for src_name in ("resize_src.png", "resize_gray.png"):
    for w, h in [(40, 30), (20, 61), (200, 150), (97, 30), (13, 73), (9, 5), (331, 7)]:
        exp = np.asarray(Image.open(path(src_name)).resize((w, h), Image.BILINEAR))
        cases["resize"].append({"file": src_name, "width": w, "height": h, "antialias": True,
                                "expected": save_npy(f"{src_name}_{w}x{h}.npy", exp)})
# Without antialiasing: torch's bilinear (align_corners=False, antialias=False) in float.
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

t = torch.from_numpy(rs).permute(2, 0, 1)[None].float()
for w, h in [(40, 30), (200, 150), (23, 70)]:
    exp = F.interpolate(t, size=(h, w), mode="bilinear", align_corners=False, antialias=False)
    exp = exp[0].permute(1, 2, 0).numpy().astype(np.float32)
    cases["resize"].append({"file": "resize_src.png", "width": w, "height": h, "antialias": False,
                            "expected": save_npy(f"resize_noaa_{w}x{h}.npy", exp)})

# ---------------------------------------------------------------- recipes vs torchvision
import torchvision.transforms as T  # noqa: E402

imagenet = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(),
                      T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])


def recipe_case(name, recipe, expected, tol, note=""):
    cases["recipe"].append({"file": name, "recipe": recipe, "tolerance": tol, "note": note,
                            "expected": save_npy(name + "." + recipe.replace("/", "_") + ".npy",
                                                 expected.astype(np.float32))})


synthetic = [("tv_500x375.jpg", smooth_rgb(500, 375)), ("tv_300x400.png", smooth_rgb(300, 400)),
             ("tv_100x80.jpg", smooth_rgb(100, 80)), ("tv_50x300.png", smooth_rgb(50, 300))]
for name, arr in synthetic:
    Image.fromarray(arr).save(path(name), **({"quality": 90} if name.endswith("jpg") else {}))
Image.fromarray(smooth_rgb(333, 250)[:, :, 0]).save(path("tv_gray.jpg"), quality=90)
Image.fromarray(rgba).resize((260, 300)).save(path("tv_rgba.png"))
tv_files = [n for n, _ in synthetic] + ["tv_gray.jpg", "tv_rgba.png"]
photos = []
if os.path.isdir(SKIMAGE_DATA):
    for f in ["astronaut.png", "chelsea.png", "coffee.png", "motorcycle_left.png", "rocket.jpg",
              "retina.jpg", "hubble_deep_field.jpg", "camera.png"]:
        if os.path.exists(os.path.join(SKIMAGE_DATA, f)):
            data = open(os.path.join(SKIMAGE_DATA, f), "rb").read()
            open(path("photo_" + f), "wb").write(data)
            photos.append("photo_" + f)
    # Re-encoded as camera JPEGs (4:2:0, quality 85) at a typical phone size.
    if os.path.exists(os.path.join(SKIMAGE_DATA, "coffee.png")):
        im = Image.open(os.path.join(SKIMAGE_DATA, "coffee.png")).convert("RGB")
        im.resize((1280, 853), Image.LANCZOS).save(path("photo_coffee_1280.jpg"), quality=85)
        photos.append("photo_coffee_1280.jpg")
        if BIG:
            im.resize((4032, 3024), Image.LANCZOS).save(path("photo_coffee_4032.jpg"), quality=92)
            photos.append("photo_coffee_4032.jpg")
            # Native-resolution photos tiled to 4032x3024: camera-like detail (entropy) per pixel.
            mosaic = Image.new("RGB", (4032, 3024))
            tiles = [f for f in ["astronaut.png", "coffee.png", "motorcycle_left.png",
                                 "hubble_deep_field.jpg", "chelsea.png", "rocket.jpg", "ihc.png"]
                     if os.path.exists(os.path.join(SKIMAGE_DATA, f))]
            x = y = row_h = i = 0
            while y < 3024:
                t = Image.open(os.path.join(SKIMAGE_DATA, tiles[i % len(tiles)])).convert("RGB")
                mosaic.paste(t, (x, y))
                x, row_h, i = x + t.width, max(row_h, t.height), i + 1
                if x >= 4032:
                    x, y, row_h = 0, y + row_h, 0
            mosaic.save(path("photo_mosaic_4032.jpg"), quality=92)
            photos.append("photo_mosaic_4032.jpg")
cases["photos"] = photos
for name in tv_files + photos:
    exp = imagenet(Image.open(path(name)).convert("RGB")).numpy()
    recipe_case(name, "torchvision-imagenet", exp, 1e-5)

# Gray output: PIL convert("L") then resize, /255.
exp = np.asarray(Image.open(path("tv_500x375.jpg")).convert("L").resize((64, 48), Image.BILINEAR))
recipe_case("tv_500x375.jpg", "gray64x48", exp[None] / np.float32(255), 1e-6)
# Letterbox 128x128 (pad 114) and PaddleOCR geometry with antialiasing on, built from PIL resizes.
im = Image.open(path("tv_500x375.jpg")).convert("RGB")
lb = np.full((128, 128, 3), 114, np.uint8)
lb[16:112] = np.asarray(im.resize((128, 96), Image.BILINEAR))  # 375*128/500 = 96
recipe_case("tv_500x375.jpg", "letterbox128", lb.transpose(2, 0, 1) / np.float32(255), 1e-6)
im = Image.open(path("tv_50x300.png")).convert("RGB").rotate(90, expand=True)  # 300x50
im.save(path("ocr_line.png"))
rw = min(320, int(np.ceil(48 * 300 / 50)))  # 288
ocr = np.zeros((3, 48, 320), np.float32)
arr = np.asarray(im.resize((rw, 48), Image.BILINEAR))[:, :, ::-1]  # BGR
ocr[:, :, :rw] = ((arr / np.float32(255) - 0.5) / 0.5).transpose(2, 0, 1)
recipe_case("ocr_line.png", "paddleocr-aa", ocr, 1e-6)

# ---------------------------------------------------------------- bad input
open(path("empty.jpg"), "wb").close()
jpg = open(path("ycc_s2.jpg"), "rb").read()
open(path("truncated.jpg"), "wb").write(jpg[: len(jpg) * 6 // 10])
prog = open(path("progressive.jpg"), "rb").read()
open(path("truncated_progressive.jpg"), "wb").write(prog[: len(prog) * 3 // 10])
png = open(path("rgb8.png"), "rb").read()
open(path("truncated.png"), "wb").write(png[: len(png) * 6 // 10])
open(path("random.jpg"), "wb").write(rng.integers(0, 256, 4000, dtype=np.uint8).tobytes())
open(path("text.png"), "wb").write(b"hello, this is not an image\n" * 10)
bomb_ihdr = struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0)
open(path("bomb.png"), "wb").write(
    b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", bomb_ihdr) +
    png_chunk(b"IDAT", zlib.compress(b"\0" * 1000)) + png_chunk(b"IEND", b""))
# A JPEG whose SOF0 claims 65000x65000.
sof = jpg.index(b"\xff\xc0")
bomb = bytearray(jpg)
bomb[sof + 5:sof + 9] = struct.pack(">HH", 65000, 65000)
open(path("bomb.jpg"), "wb").write(bytes(bomb))
idat = png.index(b"IDAT")
idat_len = struct.unpack(">I", png[idat - 4:idat])[0]
crc = bytearray(png)
crc[idat + 4 + idat_len] ^= 0xFF  # the IDAT chunk's CRC
open(path("bad_crc.png"), "wb").write(bytes(crc))
zdata = bytearray(png)
zdata[idat + 10] ^= 0xFF  # inside the zlib stream
open(path("bad_zlib.png"), "wb").write(bytes(zdata))
Image.fromarray(rgb).save(path("image.gif"))
cases["bad"] = [
    {"file": "empty.jpg", "code": "InvalidArgument", "message": "empty"},
    {"file": "truncated.jpg", "code": "InvalidArgument", "message": "truncated"},
    {"file": "truncated_progressive.jpg", "code": "InvalidArgument", "message": "truncated"},
    {"file": "truncated.png", "code": "InvalidArgument", "message": "truncated"},
    {"file": "random.jpg", "code": "InvalidArgument", "message": "not a JPEG or PNG"},
    {"file": "text.png", "code": "InvalidArgument", "message": "not a JPEG or PNG"},
    {"file": "bomb.png", "code": "InvalidArgument", "message": "100000x100000"},
    {"file": "bomb.jpg", "code": "InvalidArgument", "message": "65000x65000"},
    {"file": "bad_crc.png", "code": "InvalidArgument", "message": "CRC"},
    {"file": "bad_zlib.png", "code": "InvalidArgument", "message": "IDAT"},
    {"file": "image.gif", "code": "Unsupported", "message": "GIF"},
]
if os.path.exists(os.path.join(SKIMAGE_DATA, "truncated.jpg")):
    open(path("skimage_truncated.jpg"), "wb").write(
        open(os.path.join(SKIMAGE_DATA, "truncated.jpg"), "rb").read())
    cases["bad"].append({"file": "skimage_truncated.jpg", "code": "InvalidArgument",
                         "message": "truncated"})

with open(path("cases.json"), "w") as f:
    json.dump(cases, f, indent=1)
print(f"wrote {sum(len(v) for v in cases.values())} cases to {OUT}")
