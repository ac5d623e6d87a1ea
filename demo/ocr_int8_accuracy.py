#!/usr/bin/python3
"""INT8 accuracy of PP-OCRv4 (the recognizer and detector that `rapidocr-onnxruntime` 1.4.4 carries)
quantized by `kiln quantize`, on text rendered here with Debian's DejaVu fonts from Debian's word
list (wamerican); the ground truth is the rendered string.

usage: /usr/bin/python3 demo/ocr_int8_accuracy.py [--kiln build/release/tools/kiln/kiln]
       [--lines 1000] [--pages 40] [--calib-lines 300] [--calib-pages 60] [--method percentile]
       [--max-drop X] [--exact] [--emulate-widths] [--channel-activations] [--no-bias-correction]
       [--work DIR]
       [--only rec|det] [--ort-python bench/.venv/bin/python]

Recognizer: each line is 1-4 words (dictionary words in lower, Title or UPPER case, sometimes a
number or punctuation) in one of 21 DejaVu faces at 22-34 px, dark on a light noisy background,
rendered 48 px high (RapidOCR's recognizer height, so no resize) and padded right with zeros to
480 px (ratio 10, as RapidOCR pads a batch to its widest line), (x/255 - 0.5)/0.5. Decoded as
RapidOCR does (greedy CTC over the model's own character list, blank 0, space last). Reported:
exact-match rate and character error rate (Levenshtein / truth length) of float32, of int8 on
kiln's int8 kernels, and with --exact of the QDQ model's exact integer arithmetic (`kiln run
--reference`: what a CPU with VNNI computes; without VNNI, oneDNN's kernels use 7-bit weights in
most convolutions). --emulate-widths also evaluates (exact arithmetic, `kiln run --reference`) two
copies of the recognizer's QDQ model: one with every weight rounded to an even value as oneDNN's
kernels use them without VNNI (int8 sources, and uint8 sources of non-depthwise convolutions:
7-bit weights), one with 8-bit weights and every activation scale doubled (7-bit activations).
Detector: 640x640 pages with 6-14 lines at random places and sizes; probability map thresholded at
0.3 (RapidOCR's thresh), dilated 2x2, connected components kept when their mean probability is
>= 0.5 (box_thresh) and at least 3 px a side; box F1 of the int8 boxes against the float32 boxes
(a match is IoU >= 0.5, one to one, greedy by IoU), and of each against the rendered lines.
Calibration uses separately seeded lines and pages (never the test set). The script fetches the
wheel through tests/models/packaged_models_check.py's cache (sha256-checked).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
sys.path.insert(0, os.path.join(REPO, "tests", "pyenv"))
FONT_DIR = "/usr/share/fonts/truetype/dejavu"
WORDS = "/usr/share/dict/words"
REC_H, REC_W = 48, 480


def fonts():
    names = sorted(f for f in os.listdir(FONT_DIR)
                   if f.endswith(".ttf") and "Math" not in f and "ExtraLight" not in f)
    return [os.path.join(FONT_DIR, f) for f in names]


def word_list():
    words = [w.strip() for w in open(WORDS, encoding="utf-8")]
    return [w for w in words if w.isascii() and w.isalpha() and 2 <= len(w) <= 12]


def line_text(rng, words):
    parts = []
    for _ in range(int(rng.integers(1, 5))):
        r = rng.random()
        if r < 0.1:
            parts.append(str(int(rng.integers(0, 100000))))
            continue
        w = words[int(rng.integers(len(words)))].lower()
        case = rng.random()
        parts.append(w.upper() if case < 0.15 else w.title() if case < 0.45 else w)
        if rng.random() < 0.1:
            parts[-1] += str(rng.choice(list(",.:;!?")))
    return " ".join(parts)


def render_line(rng, words, faces):
    """A (48, width) uint8 line image and its text; width <= REC_W."""
    from PIL import Image, ImageDraw, ImageFont
    while True:
        text = line_text(rng, words)
        font = ImageFont.truetype(faces[int(rng.integers(len(faces)))], int(rng.integers(22, 35)))
        x0, y0, x1, y1 = font.getbbox(text)
        margin = int(rng.integers(3, 12))
        w = x1 - x0 + 2 * margin
        if w <= REC_W and y1 - y0 <= REC_H - 4:
            break
    bg, fg = int(rng.integers(190, 256)), int(rng.integers(0, 90))
    img = Image.new("L", (w, REC_H), bg)
    top = (REC_H - (y1 - y0)) // 2 - y0 + int(rng.integers(-2, 3))
    ImageDraw.Draw(img).text((margin - x0, top), text, fill=fg, font=font)
    a = np.asarray(img, np.float32) + rng.normal(0, rng.uniform(0, 8), (REC_H, w))
    return a.clip(0, 255).astype(np.uint8), text


def rec_batch(rng, words, faces, n):
    x = np.zeros((n, 3, REC_H, REC_W), np.float32)
    texts = []
    for i in range(n):
        img, text = render_line(rng, words, faces)
        x[i, :, :, :img.shape[1]] = (img.astype(np.float32) / 255.0 - 0.5) / 0.5
        texts.append(text)
    return x, texts


def render_page(rng, words, faces, side=640):
    """A (side, side, 3) uint8 page and the rendered lines' boxes (x0, y0, x1, y1)."""
    from PIL import Image, ImageDraw, ImageFont
    bg = int(rng.integers(200, 256))
    img = Image.new("L", (side, side), bg)
    draw = ImageDraw.Draw(img)
    boxes, y = [], int(rng.integers(8, 40))
    for _ in range(int(rng.integers(6, 15))):
        font = ImageFont.truetype(faces[int(rng.integers(len(faces)))], int(rng.integers(16, 36)))
        text = line_text(rng, words)
        x0, y0, x1, y1 = font.getbbox(text)
        if y + (y1 - y0) + 8 > side:
            break
        if x1 - x0 >= side - 16:
            continue
        x = int(rng.integers(8, side - (x1 - x0) - 8))
        draw.text((x - x0, y - y0), text, fill=int(rng.integers(0, 90)), font=font)
        boxes.append((x, y, x + x1 - x0, y + y1 - y0))
        y += y1 - y0 + int(rng.integers(8, 40))
    a = np.asarray(img, np.float32) + rng.normal(0, rng.uniform(0, 6), (side, side))
    a = a.clip(0, 255).astype(np.uint8)
    return np.repeat(a[:, :, None], 3, axis=2), boxes


def det_batch(rng, words, faces, n):
    pages = [render_page(rng, words, faces) for _ in range(n)]
    x = np.stack([(p.astype(np.float32) / 255.0 - 0.5) / 0.5 for p, _ in pages])
    return x.transpose(0, 3, 1, 2).copy(), [b for _, b in pages]


def kiln_run(kiln, model, x, work, chunk, flags=()):
    """Runs the model on x in chunks of `chunk` rows with `kiln run`; returns the first output."""
    outs = []
    for i in range(0, len(x), chunk):
        path = os.path.join(work, "in.npy")
        np.save(path, x[i:i + chunk])
        od = os.path.join(work, "out")
        subprocess.run(["rm", "-rf", od], check=True)
        r = subprocess.run([kiln, "run", model, "--input", path, "--output-dir", od, *flags],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"kiln run {model} failed: {r.stderr[-800:]}")
        files = sorted(os.listdir(od))
        outs.append(np.load(os.path.join(od, files[0])))
    return np.concatenate(outs)


def characters(model):
    import onnx
    m = onnx.load(model, load_external_data=False)
    meta = {p.key: p.value for p in m.metadata_props}
    return ["blank"] + meta["character"].splitlines() + [" "]


def ctc_decode(probs, chars):
    out = []
    for ids in probs.argmax(axis=2):
        keep = [i for k, i in enumerate(ids) if i != 0 and (k == 0 or i != ids[k - 1])]
        out.append("".join(chars[i] for i in keep))
    return out


def levenshtein(a, b):
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def text_scores(pred, truth):
    exact = np.mean([p == t for p, t in zip(pred, truth)]) * 100
    cer = sum(levenshtein(p, t) for p, t in zip(pred, truth)) / sum(len(t) for t in truth) * 100
    return exact, cer


def boxes_of(prob, thresh=0.3, box_thresh=0.5):
    from scipy import ndimage
    mask = ndimage.binary_dilation(prob > thresh, structure=np.ones((2, 2), bool))
    labels, _ = ndimage.label(mask)
    boxes = []
    for k, sl in enumerate(ndimage.find_objects(labels), 1):
        if sl is None:
            continue
        ys, xs = sl
        if ys.stop - ys.start < 3 or xs.stop - xs.start < 3:
            continue
        region = labels[sl] == k
        if prob[sl][region].mean() >= box_thresh:
            boxes.append((xs.start, ys.start, xs.stop, ys.stop))
    return boxes


def iou(a, b):
    ix = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union else 0.0


def matches(found, ref, thr=0.5):
    pairs = sorted(((iou(f, r), i, j) for i, f in enumerate(found) for j, r in enumerate(ref)),
                   reverse=True)
    used_f, used_r, n = set(), set(), 0
    for v, i, j in pairs:
        if v < thr:
            break
        if i not in used_f and j not in used_r:
            used_f.add(i)
            used_r.add(j)
            n += 1
    return n


def f1(found_pages, ref_pages):
    tp = sum(matches(f, r) for f, r in zip(found_pages, ref_pages))
    nf = sum(len(f) for f in found_pages)
    nr = sum(len(r) for r in ref_pages)
    return 2 * tp / (nf + nr) if nf + nr else 1.0


def quantize(kiln, model, calib, out, method, extra):
    r = subprocess.run([kiln, "quantize", model, "--calibrate", calib, "--out", out, "--method",
                        method] + extra, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"kiln quantize failed: {r.stderr[-800:]}")
    return r.stdout


def width_variants(q, work):
    """The QDQ model `q` with 7-bit weights (halved as oneDNN does without VNNI) and, apart, with
    7-bit activations (every QuantizeLinear scale doubled); their paths."""
    import onnx
    from onnx import numpy_helper as nh
    out = {}
    for kind in ("7-bit weights", "7-bit activations"):
        m = onnx.load(q)
        g = m.graph
        inits = {t.name: t for t in g.initializer}
        prod = {o: n for n in g.node for o in n.output}
        done = set()
        for n in g.node:
            if kind == "7-bit activations" and n.op_type == "QuantizeLinear":
                if n.input[1] in done:
                    continue
                t = inits[n.input[1]]
                t.CopyFrom(nh.from_array(nh.to_array(t) * np.float32(2), t.name))
                done.add(n.input[1])
            elif kind == "7-bit weights" and n.op_type == "Conv":
                dx, dw = prod.get(n.input[0]), prod.get(n.input[1])
                if not (dx and dw and dx.op_type == dw.op_type == "DequantizeLinear"):
                    continue
                signed = inits[dx.input[2]].data_type == onnx.TensorProto.INT8
                t = inits[dw.input[0]]
                w = nh.to_array(t)
                group = next((a.i for a in n.attribute if a.name == "group"), 1)
                if group > 1 and w.shape[1] == 1 and w.shape[0] == group and not signed:
                    continue  # depthwise with a uint8 source: kiln keeps 8 bits
                half = (np.round(w.astype(np.float32) / 2) * 2).clip(-128, 126).astype(np.int8)
                t.CopyFrom(nh.from_array(half, t.name))
        out[kind] = os.path.join(work, f"rec.int8.{kind.replace(' ', '_')}.onnx")
        onnx.save(m, out[kind])
    return out


def ort_first_output(ort_python, model, x, work):
    path = os.path.join(work, "ort_in.npy")
    out = os.path.join(work, "ort_out.npy")
    np.save(path, x)
    code = ("import sys, numpy as np, onnxruntime as ort\n"
            "so = ort.SessionOptions(); so.log_severity_level = 3\n"
            "s = ort.InferenceSession(sys.argv[1], so, providers=['CPUExecutionProvider'])\n"
            "x = np.load(sys.argv[2]); name = s.get_inputs()[0].name\n"
            "np.save(sys.argv[3], np.concatenate([s.run(None, {name: x[i:i + 50]})[0]\n"
            "                                     for i in range(0, len(x), 50)]))\n")
    subprocess.run([ort_python, "-c", code, model, path, out], check=True)
    return np.load(out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kiln", default=os.path.join(REPO, "build/release/tools/kiln/kiln"))
    p.add_argument("--lines", type=int, default=1000)
    p.add_argument("--pages", type=int, default=40)
    p.add_argument("--calib-lines", type=int, default=300)
    p.add_argument("--calib-pages", type=int, default=60)
    p.add_argument("--method", default="percentile")
    p.add_argument("--quantize-all", action="store_true")
    p.add_argument("--no-bias-correction", action="store_true",
                   help="pass --no-bias-correction to kiln quantize (on by default since "
                        "2026-11-29)")
    p.add_argument("--channel-activations", action="store_true",
                   help="kiln quantize --channel-activations (per-channel scales on depthwise "
                        "convolutions' inputs)")
    p.add_argument("--max-drop", type=float,
                   help="kiln quantize --max-drop for the recognizer (argmax agreement with "
                        "float32 per time step, on --held-out lines after the calibration ones)")
    p.add_argument("--held-out", type=int, default=200)
    p.add_argument("--exact", action="store_true",
                   help="also the QDQ model's exact arithmetic (kiln run --reference: one thread, "
                        "minutes)")
    p.add_argument("--emulate-widths", action="store_true",
                   help="also the recognizer's exact arithmetic with 7-bit weights, and apart "
                        "with 7-bit activations (needs the onnx module: Debian's python3-onnx)")
    p.add_argument("--only", choices=["rec", "det"])
    p.add_argument("--work")
    p.add_argument("--ort-python")
    a = p.parse_args()
    import packaged_models_check
    root = packaged_models_check.fetch("ppocr")
    if root is None:
        sys.exit("cannot fetch rapidocr-onnxruntime 1.4.4")
    work = a.work or tempfile.mkdtemp(prefix="kiln_ocr_int8_")
    os.makedirs(work, exist_ok=True)
    words, faces = word_list(), fonts()
    extra = (["--quantize-all"] if a.quantize_all else []) + (
        ["--channel-activations"] if a.channel_activations else []) + (
        ["--no-bias-correction"] if a.no_bias_correction else [])
    print(f"{len(words)} words, {len(faces)} DejaVu faces, method {a.method}"
          f"{', all layers int8' if a.quantize_all else ', first/last layers float'}"
          f"{', per-channel depthwise input scales' if a.channel_activations else ''}"
          f"{', no bias correction' if a.no_bias_correction else ''}")

    if a.only in (None, "rec"):
        model = os.path.join(root, "ch_PP-OCRv4_rec_infer.onnx")
        chars = characters(model)
        rows = a.calib_lines + (a.held_out if a.max_drop is not None else 0)
        calib, _ = rec_batch(np.random.default_rng(1), words, faces, rows)
        np.save(os.path.join(work, "rec_calib.npy"), calib)
        q = os.path.join(work, "rec.int8.onnx")
        control = [] if a.max_drop is None else [
            "--samples", str(a.calib_lines), "--eval-samples", str(a.held_out), "--max-drop",
            str(a.max_drop)]
        log = quantize(a.kiln, model, os.path.join(work, "rec_calib.npy"), q, a.method,
                       extra + control)
        for line in log.splitlines():
            if line.startswith(("quantized", "accuracy control", "  converted", "  per-channel")):
                print(line)
        x, truth = rec_batch(np.random.default_rng(2), words, faces, a.lines)
        rows = [("float32", kiln_run(a.kiln, model, x, work, 100)),
                ("int8", kiln_run(a.kiln, q, x, work, 100))]
        if a.exact:
            rows.append(("int8 QDQ exact", kiln_run(a.kiln, q, x, work, 100, ["--reference"])))
        if a.ort_python:
            rows.append(("ORT int8 (same QDQ)", ort_first_output(a.ort_python, q, x, work)))
        if a.emulate_widths:
            for kind, path in width_variants(q, work).items():
                rows.append((f"exact, {kind}", kiln_run(a.kiln, path, x, work, 100, ["--reference"])))
        print(f"recognizer, {a.lines} lines: exact match, character error rate")
        base = None
        for name, probs in rows:
            exact, cer = text_scores(ctc_decode(probs, chars), truth)
            base = base or (exact, cer)
            print(f"  {name:20s} {exact:6.2f} %  CER {cer:5.2f} %   (exact {exact - base[0]:+.2f} pt,"
                  f" CER {cer - base[1]:+.2f} pt)")
        f32, i8 = ctc_decode(rows[0][1], chars), ctc_decode(rows[1][1], chars)
        print(f"  int8 text equal to float32 text: {np.mean([u == v for u, v in zip(f32, i8)]) * 100:.2f} %")

    if a.only in (None, "det"):
        model = os.path.join(root, "ch_PP-OCRv4_det_infer.onnx")
        calib, _ = det_batch(np.random.default_rng(3), words, faces, a.calib_pages)
        np.save(os.path.join(work, "det_calib.npy"), calib)
        q = os.path.join(work, "det.int8.onnx")
        quantize(a.kiln, model, os.path.join(work, "det_calib.npy"), q, a.method,
                 extra + ["--batch", "8"])
        x, truth = det_batch(np.random.default_rng(4), words, faces, a.pages)
        f32 = [boxes_of(m[0]) for m in kiln_run(a.kiln, model, x, work, 8)]
        i8 = [boxes_of(m[0]) for m in kiln_run(a.kiln, q, x, work, 8)]
        print(f"detector, {a.pages} pages, {sum(len(t) for t in truth)} rendered lines: "
              f"{sum(len(b) for b in f32)} float32 boxes, {sum(len(b) for b in i8)} int8 boxes")
        print(f"  box F1 int8 vs float32: {f1(i8, f32):.4f}")
        print(f"  box F1 vs rendered lines: float32 {f1(f32, truth):.4f}, int8 {f1(i8, truth):.4f}")


if __name__ == "__main__":
    main()
