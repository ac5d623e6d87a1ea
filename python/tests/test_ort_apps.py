"""kiln.ort under applications written for ONNX Runtime: each application runs twice, in separate
processes of its own venv, once on ONNX Runtime 1.32.0 and once after kiln.ort.install(), and
what it returns is compared.

- RapidOCR (rapidocr-onnxruntime 1.4.4: PP-OCRv4 detector and recognizer, PP-OCR direction
  classifier, all three in its wheel): its whole pipeline, `RapidOCR()(image)`, on pages of words
  and numbers rendered with DejaVu fonts at several sizes, light on dark, a line upside down (the
  classifier turns it), and text drawn on photos (scikit-image's). Texts equal, boxes within 2 px,
  scores within 0.02, and at least 80% of the words rendered upright found in ONNX Runtime's text
  (so empty results cannot pass).
- Silero VAD (silero-vad 6.2.3, its ONNX model in the wheel; audio, the one such application
  found that carries its model and runs offline besides RapidOCR): get_speech_timestamps on a
  synthetic voiced signal with pauses, and the model's per-chunk speech probability at 16 and
  8 kHz. Timestamps equal, probabilities within 1e-4, ONNX Runtime hearing speech and silence.

The venv (${XDG_CACHE_HOME:-~/.cache}/kiln/ort-apps-venv, tests/pyenv/check_venv.py) sees
Debian's packages (numpy, torch, PIL, scikit-image, OpenCV, pyclipper, shapely, PyYAML) and
holds the pinned wheels below. An unreachable package index is a skip (a failure under CI); any
other failure to make it, or a missing Debian package, fails. This file is also the applications'
driver: `python test_ort_apps.py APP MODE WORKDIR` (MODE ort or kiln).
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
APP_PINS = [
    "onnxruntime==1.32.0",
    "flatbuffers==25.12.19",
    "protobuf==4.25.8",  # onnxruntime >= 4.25.8 (Debian's is 4.21.12)
    "rapidocr-onnxruntime==1.4.4",
    "silero-vad==6.2.3",
]
FONTS = "/usr/share/fonts/truetype/dejavu"

# ---- the pytest side ----------------------------------------------------------------------------


def _app_python():
    import pytest
    sys.path.insert(0, os.path.join(REPO, "tests", "pyenv"))
    import check_venv
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    try:
        return check_venv.python_or_skip(APP_PINS, os.path.join(cache, "kiln", "ort-apps-venv"),
                                         system_site=True)
    except SystemExit as e:  # check_venv's skip (77) or failure (1), having printed why
        if e.code == 77:
            pytest.skip("the package index cannot be reached to make the apps venv")
        pytest.fail(f"the apps venv could not be made (check_venv exit {e.code}; output above)")


def _run(py, app, mode, workdir):
    """Runs this file as the application's driver; returns what it wrote."""
    import kiln
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(kiln.__file__)),
               PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([py, os.path.abspath(__file__), app, mode, str(workdir)], env=env,
                       capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, f"{app} on {mode} failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    if mode == "prepare":
        return None
    with open(os.path.join(workdir, f"{app}_{mode}.json")) as f:
        return json.load(f)


def _both(tmp_path, app):
    py = _app_python()
    _run(py, app, "prepare", tmp_path)
    ref = _run(py, app, "ort", tmp_path)
    got = _run(py, app, "kiln", tmp_path)
    assert ref["onnxruntime"].endswith(os.path.join("onnxruntime", "__init__.py")), ref
    assert got["onnxruntime"].endswith(os.path.join("kiln", "ort", "__init__.py")), got
    assert got["session_class"] == "kiln.ort.capi.onnxruntime_inference_collection." \
                                   "InferenceSession", got
    return ref, got


def test_rapidocr_pipeline_same_on_kiln_and_onnx_runtime(tmp_path):
    ref, got = _both(tmp_path, "rapidocr")
    assert sorted(ref["results"]) == sorted(got["results"])
    for image, want in ref["results"].items():
        have = got["results"][image]
        assert [t for _, t, _ in have] == [t for _, t, _ in want], image
        for (box_k, text, score_k), (box_o, _, score_o) in zip(have, want):
            d = max(abs(a - b) for pk, po in zip(box_k, box_o) for a, b in zip(pk, po))
            assert d <= 2, f"{image} '{text}': box off by {d} px ({box_k} vs {box_o})"
            assert abs(score_k - score_o) <= 0.02, f"{image} '{text}': {score_k} vs {score_o}"
    # The text was read: most words rendered upright are in ONNX Runtime's (= kiln's) results.
    with open(os.path.join(tmp_path, "words.json")) as f:
        words = json.load(f)
    found, missing = 0, []
    for image, expected in words.items():
        text = "".join(t for _, t, _ in ref["results"][image]).replace(" ", "").lower()
        for w in expected:
            if w.lower() in text:
                found += 1
            else:
                missing.append((image, w))
    total = sum(len(w) for w in words.values())
    assert total >= 30 and found >= 0.8 * total, f"{found}/{total} words read; missing {missing}"
    assert all(ref["results"][image] for image in ref["results"]), "an image without text found"


def test_silero_vad_same_on_kiln_and_onnx_runtime(tmp_path):
    ref, got = _both(tmp_path, "silero")
    assert ref["timestamps"], "ONNX Runtime found no speech in the signal"
    speech = sum(t["end"] - t["start"] for t in ref["timestamps"])
    assert speech < 0.8 * ref["samples"], "ONNX Runtime found no silence in the signal"
    assert got["timestamps"] == ref["timestamps"]
    for rate in ("16000", "8000"):
        a, b = ref["probs"][rate], got["probs"][rate]
        assert len(a) == len(b) and len(a) > 40
        assert max(abs(x - y) for x, y in zip(a, b)) <= 1e-4, rate
        assert any(p > 0.5 for p in a) and any(p < 0.5 for p in a), rate


# ---- the applications' side (run in the apps venv) ----------------------------------------------

def _use(mode):
    """Imports onnxruntime: the real one, or kiln.ort installed as it."""
    if mode == "kiln":
        import kiln.ort
        kiln.ort.install()
    import onnxruntime
    return onnxruntime


def _font(name, size):
    from PIL import ImageFont
    return ImageFont.truetype(os.path.join(FONTS, name), size)


def _prepare_rapidocr(workdir):
    """Images with rendered text (PNG) and the words drawn upright in each (words.json)."""
    import numpy as np
    import skimage.data
    from PIL import Image, ImageDraw
    words = {}

    def page(name, size, lines, background=(255, 255, 255), ink=(20, 20, 20), noise=0):
        img = Image.new("RGB", size, background)
        d = ImageDraw.Draw(img)
        y, drawn = 24, []
        for font, px, text, x in lines:
            d.text((x, y), text, font=_font(font, px), fill=ink)
            y += int(px * 1.9)
            drawn += text.split()
        if noise:
            rng = np.random.default_rng(7)
            a = np.asarray(img).astype(np.int16) + rng.integers(-noise, noise + 1, (*size[::-1], 3))
            img = Image.fromarray(a.clip(0, 255).astype(np.uint8))
        img.save(os.path.join(workdir, name))
        words[name] = [w.strip(".,:") for w in drawn]

    page("page_sizes.png", (900, 560), [
        ("DejaVuSans.ttf", 22, "Invoice number 58731 issued today", 30),
        ("DejaVuSans.ttf", 28, "Total amount 1234.56 EUR", 40),
        ("DejaVuSans-Bold.ttf", 36, "Quick brown fox 2024", 30),
        ("DejaVuSans.ttf", 48, "Order 4217 shipped", 50),
        ("DejaVuSerif.ttf", 30, "Warehouse Berlin 10115", 30),
    ], noise=6)
    page("page_dark.png", (820, 420), [
        ("DejaVuSans-Bold.ttf", 34, "Kiln runs ONNX models", 40),
        ("DejaVuSansMono.ttf", 30, "Batch 32 latency 4.7 ms", 40),
        ("DejaVuSerif-Bold.ttf", 40, "Station 9 Platform 3", 40),
    ], background=(25, 35, 70), ink=(240, 240, 230))
    page("page_small.png", (700, 330), [
        ("DejaVuSans.ttf", 18, "Meeting moved to Thursday 14:30", 20),
        ("DejaVuSansCondensed.ttf", 24, "Room 301 second floor", 20),
        ("DejaVuSans.ttf", 20, "Call 555 0199 for details", 20),
    ])
    # One line upside down above an upright one: the direction classifier turns it back.
    img = Image.new("RGB", (760, 240), (250, 250, 245))
    line = Image.new("RGB", (700, 70), (250, 250, 245))
    ImageDraw.Draw(line).text((10, 10), "Upside down line 8080", font=_font("DejaVuSans.ttf", 40),
                              fill=(10, 10, 10))
    img.paste(line.rotate(180), (30, 20))
    ImageDraw.Draw(img).text((40, 140), "Normal line 4455", font=_font("DejaVuSans.ttf", 40),
                             fill=(10, 10, 10))
    img.save(os.path.join(workdir, "rotated.png"))
    words["rotated.png"] = ["Normal", "line", "4455"]
    # Photos with captions.
    for name, photo, lines in [
        ("photo_chelsea.png", skimage.data.chelsea(), [("CAT 2024", 44, (20, 20)),
                                                       ("Chelsea sleeps", 34, (20, 240))]),
        ("photo_coffee.png", skimage.data.coffee(), [("Coffee break 10:30", 40, (30, 24)),
                                                     ("Espresso 2.50", 36, (300, 330))]),
    ]:
        img = Image.fromarray(photo)
        d = ImageDraw.Draw(img)
        for text, px, xy in lines:
            d.text(xy, text, font=_font("DejaVuSans-Bold.ttf", px), fill=(255, 255, 255),
                   stroke_width=3, stroke_fill=(0, 0, 0))
        img.save(os.path.join(workdir, name))
        words[name] = [w for text, _, _ in lines for w in text.split()]
    with open(os.path.join(workdir, "words.json"), "w") as f:
        json.dump(words, f, indent=1)


def _rapidocr(mode, workdir):
    ort = _use(mode)
    from rapidocr_onnxruntime import RapidOCR
    from rapidocr_onnxruntime.utils import infer_engine
    engine = RapidOCR()
    results = {}
    for name in sorted(f for f in os.listdir(workdir) if f.endswith(".png")):
        result, _ = engine(os.path.join(workdir, name))
        results[name] = [[[[float(v) for v in p] for p in box], text, float(score)]
                         for box, text, score in (result or [])]
        print(mode, name, [r[1] for r in results[name]], flush=True)
    cls = infer_engine.InferenceSession
    return {"onnxruntime": ort.__file__, "session_class": f"{cls.__module__}.{cls.__qualname__}",
            "results": results}


def _prepare_silero(workdir):
    """16 s of voiced 'phrases' (a gliding 110-230 Hz fundamental, 12 harmonics, 4-5 Hz
    syllables) separated by pauses of noise, at 16 kHz."""
    import numpy as np
    rate, rng = 16000, np.random.default_rng(11)
    t = np.arange(16 * rate) / rate
    f0 = 170 + 60 * np.sin(2 * np.pi * 0.6 * t)
    phase = 2 * np.pi * np.cumsum(f0) / rate
    voice = sum(np.sin(k * phase) * (0.8 ** k) for k in range(1, 13))
    syllables = np.clip(np.sin(2 * np.pi * 4.5 * t), 0, None) ** 0.7
    phrases = ((t % 4.0) < 2.2) & (t > 0.8)  # 2.2 s of speech, 1.8 s pause, repeated
    wav = 0.4 * voice * syllables * phrases + 0.005 * rng.standard_normal(t.size)
    np.save(os.path.join(workdir, "speech_16k.npy"), wav.astype(np.float32))


def _silero(mode, workdir):
    ort = _use(mode)
    import numpy as np
    import torch
    import silero_vad
    from silero_vad import get_speech_timestamps, load_silero_vad
    wav = torch.from_numpy(np.load(os.path.join(workdir, "speech_16k.npy")))
    model = load_silero_vad(onnx=True)
    timestamps = get_speech_timestamps(wav, model, sampling_rate=16000)
    probs = {}
    for rate, chunk in ((16000, 512), (8000, 256)):
        x = wav if rate == 16000 else wav[::2].contiguous()
        model.reset_states()
        probs[str(rate)] = [float(model(x[i:i + chunk], rate))
                            for i in range(0, x.numel() - chunk + 1, chunk)]
    cls = type(model.session)
    print(mode, silero_vad.__file__, timestamps, flush=True)
    return {"onnxruntime": ort.__file__, "session_class": f"{cls.__module__}.{cls.__qualname__}",
            "timestamps": timestamps, "samples": int(wav.numel()), "probs": probs}


def _main(app, mode, workdir):
    if mode == "prepare":
        {"rapidocr": _prepare_rapidocr, "silero": _prepare_silero}[app](workdir)
        return 0
    out = {"rapidocr": _rapidocr, "silero": _silero}[app](mode, workdir)
    with open(os.path.join(workdir, f"{app}_{mode}.json"), "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(_main(*sys.argv[1:4]))
