#!/usr/bin/env python3
"""`kiln bench --report`: a batch sweep and a concurrency sweep drawn as HTML, checked as a
document and in a browser.

usage: report_check.py KILN MODEL.onnx

For each sweep, kiln bench writes --json and --report side by side. The page must parse as XML
(XHTML-clean: every SVG element closed), hold two SVG charts whose lines have one point per swept
value at heights that follow the JSON's figures, and a table with the JSON's numbers. Then
Debian's Chromium opens it headless: the DOM it builds must hold both charts, the console must
show no error, and its screenshot must show drawn pixels. Without Chromium: a skip (under CI a
failure; scripts/setup.sh installs it).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyenv"))
import check_venv  # noqa: E402

SVG = "{http://www.w3.org/2000/svg}"
FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


def points(polyline):
    return [tuple(float(v) for v in p.split(",")) for p in polyline.get("points").split()]


def check_page(html_path, doc, key, xname):
    rows = doc[key]
    xs = [r[xname] for r in rows]
    text = open(html_path).read()
    try:
        root = ET.fromstring(text.split("\n", 1)[1])  # after <!DOCTYPE html>
    except ET.ParseError as e:
        check(False, f"{key}: the page parses as XML ({e})")
        return
    svgs = root.findall(f".//{SVG}svg")
    check(len(svgs) == 2, f"{key}: two SVG charts ({len(svgs)})")
    if len(svgs) != 2:
        return
    lat = svgs[0].findall(f"{SVG}polyline")
    check(len(lat) == 2 and all(len(points(p)) == len(xs) for p in lat),
          f"{key}: p50 and p99 lines with {len(xs)} points each")
    # Heights follow the figures: the y axis runs from 0 at the plot frame's bottom to its top
    # label at the frame's top (SVG y grows downward), so each point must sit where its JSON value
    # puts it, within the half pixel the coordinates are rounded to. (An order-only check failed
    # on a concurrency sweep whose p50s differ by less than a pixel under a tall p99 axis.)
    p50_y = [y for _, y in points(lat[0])]
    want = [r["latency_ms"]["p50"] for r in rows]
    frame = svgs[0].find(f"{SVG}rect")
    top, height = float(frame.get("y")), float(frame.get("height"))
    labels = [float(t.text) for t in svgs[0].findall(f"{SVG}text")
              if t.get("text-anchor") == "end"]
    ymax = max(labels) if labels else 0
    expect = [top + height - height * v / ymax for v in want] if ymax > 0 else []
    placed = len(expect) == len(p50_y) and all(abs(a - b) <= 0.51 for a, b in zip(expect, p50_y))
    check(placed, f"{key}: the p50 line's heights follow the JSON ({want} ms on a 0..{ymax} axis: "
                  f"y {p50_y}, expected {[round(e, 2) for e in expect]})")
    band = svgs[0].findall(f"{SVG}polygon")
    check(len(band) == 1 and len(band[0].get("points").split()) == 2 * len(xs),
          f"{key}: a spread band with {2 * len(xs)} corners")
    thr = svgs[1].findall(f"{SVG}polyline")
    check(len(thr) == 1 and len(points(thr[0])) == len(xs), f"{key}: a throughput line")
    cells = [[td.text for td in tr.findall("td")] for tr in root.iter("tr")][1:]
    check([c[0] for c in cells] == [str(x) for x in xs], f"{key}: table rows {xs}")


def browse(chromium, html_path, tmp):
    shot = os.path.join(tmp, os.path.basename(html_path) + ".png")
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
              "--disable-extensions", f"--user-data-dir={tmp}/profile", "--enable-logging=stderr",
              "--v=0", "--window-size=800,1400"]
    r = subprocess.run(common + ["--dump-dom", "file://" + html_path], capture_output=True,
                       text=True, timeout=120)
    check(r.returncode == 0 and r.stdout.count("<svg") == 2,
          f"Chromium builds the page with both charts (rc {r.returncode})")
    errors = [line for line in r.stderr.splitlines()
              if "CONSOLE" in line or "Uncaught" in line]
    check(not errors, f"no console errors ({errors[:2]})")
    r = subprocess.run(common + [f"--screenshot={shot}", "file://" + html_path],
                       capture_output=True, text=True, timeout=120)
    ok = r.returncode == 0 and os.path.exists(shot)
    drawn = 0
    if ok:
        from PIL import Image
        img = Image.open(shot).convert("L")
        drawn = sum(1 for v in img.getdata() if v < 200)
    check(ok and drawn > 5000, f"the screenshot shows the charts ({drawn} dark pixels)")


def main():
    kiln, model = sys.argv[1], sys.argv[2]
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    tmp = tempfile.mkdtemp()
    runs = [("sweep", "batch", ["--batch", "1,2,4,8", "--iterations", "8", "--warmup", "2"]),
            ("concurrency", "concurrency",
             ["--concurrency", "1,2,4", "--duration", "0.5", "--max-batch", "8"])]
    for key, xname, args in runs:
        html = os.path.join(tmp, key + ".html")
        js = os.path.join(tmp, key + ".json")
        r = subprocess.run([kiln, "bench", model, "--threads", "1", *args, "--json", js,
                            "--report", html], capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, f"kiln bench {' '.join(args)} --report (rc {r.returncode}) "
                                 f"{r.stderr[-300:]}")
        if r.returncode != 0:
            continue
        check_page(html, json.load(open(js)), key, xname)
        if chromium:
            browse(chromium, html, tmp)
    r = subprocess.run([kiln, "bench", model, "--report", os.path.join(tmp, "x.html")],
                       capture_output=True, text=True)
    check(r.returncode != 0 and "sweep" in r.stderr, "--report without a sweep is refused")
    r = subprocess.run([kiln, "bench", model, "--batch", "1,2", "--iterations", "2", "--report",
                        os.path.join(tmp, "no", "such", "folder", "r.html")],
                       capture_output=True, text=True)
    check(r.returncode != 0 and "cannot write the report" in r.stderr,
          f"an unwritable --report path is a clear error (rc {r.returncode}): {r.stderr[-200:]}")
    print(f"{len(FAILURES)} failed")
    if FAILURES:
        sys.exit(1)
    if not chromium:
        check_venv.skip("Chromium is not installed (scripts/setup.sh installs Debian's chromium)")


if __name__ == "__main__":
    main()
