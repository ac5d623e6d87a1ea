#!/usr/bin/env python3
"""Render the benchmark results in bench/results/*.json into the docs' results blocks.

usage: python3 scripts/render_results.py            rewrite every stale block in README.md, docs/*.md
       python3 scripts/render_results.py --check    exit 1, naming each stale block, if any differs
                                                    (or a date in docs/*.md outside the blocks)
       python3 scripts/render_results.py --list     each series: its latest file, where it is shown

A block in a doc is

    <!-- results:NAME -->
    (generated: one line with the date, machine, command and results file, the table, its notes)
    <!-- /results:NAME -->

NAME is a series: the files bench/results/NAME_<YYYY-MM-DD>.json (or NAME_unstated.json for a
record whose date the docs never gave), of which the block shows the latest. Several series in
one block: NAME1,NAME2 (their rows in one table; the threads results use it). A new run of a
benchmark adds a file; the older one stays as history and the docs show the new one.

Kinds of results file:
- "kind": "table" (most files): date, machine, command (a string or a list), columns, rows (lists
  of cells, Markdown as written), optional notes (paragraphs under the table).
- The files the bench scripts write themselves, recognised by their series name: memory
  (bench/memory_bench.py), threads_* (bench/threads_bench.py), ray (bench/ray_bench.py),
  python (bench/python_bench.py), trace_overhead (bench/trace_overhead.py). memory, threads and
  ray are drawn by the bench script's own render(), so `bench/X.py --render` and the docs agree.

Standard library only; the docs' tests run it with --check.
"""
import argparse
import glob
import importlib.util
import json
import os
import re
import statistics
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "bench", "results")
FILE_RE = re.compile(r"^(?P<series>[A-Za-z0-9_.-]+?)_(?P<date>\d{4}-\d{2}-\d{2}|unstated)\.json$")
# A marker is a line of its own (a mention inside a sentence or code span is not one).
BLOCK_RE = re.compile(r"^<!-- results:(?P<names>[A-Za-z0-9_.,-]+) -->\n(?P<body>.*?)"
                      r"^<!-- /results:(?P=names) -->$", re.S | re.M)
OPEN_RE = re.compile(r"^<!-- results:(\S+) -->$", re.M)
CLOSE_RE = re.compile(r"^<!-- /results:(\S+) -->$", re.M)


class RenderError(Exception):
    pass


def docs():
    return [os.path.join(REPO, "README.md")] + sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))


def series_files():
    """{series: [(date, path)] sorted oldest first; 'unstated' before any date}."""
    out = {}
    for path in glob.glob(os.path.join(RESULTS, "*.json")):
        m = FILE_RE.match(os.path.basename(path))
        if not m:
            continue
        out.setdefault(m.group("series"), []).append((m.group("date"), path))
    for v in out.values():
        v.sort(key=lambda dp: ("0" if dp[0] == "unstated" else "1" + dp[0]))
    return out


def load_module(name):
    """A bench script as a module (only the stdlib ones: memory_bench, threads_bench, ray_bench)."""
    path = os.path.join(REPO, "bench", name + ".py")
    spec = importlib.util.spec_from_file_location("kiln_bench_" + name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------------------------------------
# Kinds. Each: meta(res) -> (date, machine, [commands]); body(list of res) -> Markdown lines.

def md_table(columns, rows, where):
    def line(cells):
        return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"
    lines = [line(columns), "|" + "---|" * len(columns)]
    for row in rows:
        if len(row) != len(columns):
            raise RenderError(f"{where}: a row has {len(row)} cells for {len(columns)} columns: {row}")
        lines.append(line(row))
    return lines


def commands_of(res):
    c = res.get("command", "unstated")
    return c if isinstance(c, list) else [c]


def table_meta(res):
    return res.get("date", "unstated"), res.get("machine", "unstated"), commands_of(res)


def table_body(items):
    (first_path, first), rest = items[0], items[1:]
    cols = first["columns"]
    rows = list(first["rows"])
    for path, res in rest:
        if res["columns"] != cols:
            raise RenderError(f"{path}: columns differ from {first_path}'s; cannot share a table")
        rows += res["rows"]
    lines = md_table(cols, rows, first_path)
    for _, res in items:
        for note in res.get("notes", []):
            lines += ["", note]
    return lines


def memory_meta(res):
    sessions = ",".join(str(n) for n in sorted({r["sessions"] for r in res["rows"]}))
    cmd = f"bench/memory_bench.py {res['model']} --sessions {sessions}"
    if res.get("cycles"):
        cmd += f" --cycles {res['cycles']['cycles']}"
    return res["date"], res["cpu"], [cmd]


def memory_body(items):
    mod = load_module("memory_bench")
    lines = []
    for i, (_, res) in enumerate(items):
        lines += ([""] if i else []) + mod.render(res).split("\n")
    return lines


def threads_meta(res):
    if res["limit"] == "affinity":
        cmd = f"--limit affinity --cpus {res['limit_value']}"
    else:
        cmd = f"--limit cgroup --quota {res['limit_value']}" + (" --pin" if res.get("pinned") else "")
    cmd = (f"bench/threads_bench.py KILN {res['model']} {cmd} --before-threads "
           f"{res['threads_before']} --rounds {len(res['rounds'])}")
    return res["date"], res["cpu"], [cmd]


def threads_body(items):
    mod = load_module("threads_bench")
    lines = ["| model, limit | threads before -> after | p50 | p50 before/after | p99 | "
             "p99 before/after |", "|---|---|---|---|---|---|"]
    return lines + [mod.render(res) for _, res in items]


def ray_meta(res):
    cpu = res["machine"]["cpu"]
    return (res["date"][:10], f"{cpu.get('model', 'CPU')}, {res['machine']['cpus']} CPUs",
            [f"python3 bench/ray_bench.py --rounds {len(res['rounds'])}"])


def ray_body(items):
    mod = load_module("ray_bench")
    lines = []
    for i, (_, res) in enumerate(items):
        lines += ([""] if i else []) + mod.render(res).split("\n")
    return lines


def cpu_words(cpu):
    """bench/python_bench.py's `cpu` (kiln.doctor()['cpu']) in words."""
    return (f"{cpu['physical_cores']}-core {cpu['model']} (oneDNN ISA {cpu.get('onednn_isa', '?')}, "
            f"bf16 {'yes' if cpu.get('bf16') else 'no'}, int8 {cpu.get('int8', '?')})")


def python_meta(res):
    return (res["date"], cpu_words(res["cpu"]),
            ["PYTHONPATH=build/release/python ~/.cache/kiln/check-venv/bin/python "
             f"bench/python_bench.py --rounds {res['rounds']}"])


MODEL_NAMES = {"resnet18": "ResNet-18", "resnet50": "ResNet-50", "mobilenet_v2": "MobileNetV2",
               "efficientnet_b0": "EfficientNet-B0", "convnext_tiny": "ConvNeXt-tiny"}


def python_body(items):
    lines = ["| target | measured | met |", "|---|---|---|"]
    for _, res in items:
        def rng(s, fmt, unit=""):
            return (f"{fmt.format(s['median'])}{unit} "
                    f"[{fmt.format(s['min'])}-{fmt.format(s['max'])}]")
        if "overhead" in res:
            o = res["overhead"]
            r0 = o["rounds"][0]
            lines.append(
                "| `Session.run` at most 15 us over C++ `RunInto` (Relu on float32[1,16], 20,000 "
                "calls each, C++ timed in a C++ loop) | "
                f"+{rng(o['run_minus_native_us'], '{:.1f}', ' us')} (C++ {r0['native_run_into_us']:.1f} us; "
                f"`run_into` +{o['run_into_minus_native_us']['median']:.1f} us; ONNX Runtime's Python "
                f"`run` {r0['ort_python_run_us']:.1f} us) | "
                f"{'yes' if o['run_minus_native_us']['median'] <= o.get('target_us', 15) else 'no'} |")
        if "resnet50_b32" in res:
            o = res["resnet50_b32"]
            lines.append(
                "| ResNet-50 b32 items/s from Python within 2 % of `kiln bench` (2 threads; both the "
                f"batch over the mean run) | {rng(o['python_over_cli'], '{:.3f}', 'x')} | "
                f"{'yes' if o['python_over_cli']['median'] >= o.get('target', 0.98) else 'no'} |")
        if "threads" in res:
            o = res["threads"]
            lines.append(
                "| two Python threads sharing one session at least 1.8x one (ResNet-18 b1, 1 compute "
                f"thread per run, 8 s each) | {rng(o['two_over_one'], '{:.2f}', 'x')} | "
                f"{'yes' if o['two_over_one']['median'] >= 1.8 else 'no'} |")
        if "import" in res:
            o = res["import"]
            lines.append(f"| `import kiln` under 150 ms (10 fresh interpreters) | "
                         f"{o['median_ms']:.0f} ms | "
                         f"{'yes' if o['median_ms'] < o.get('target_ms', 150) else 'no'} |")
        if "ort_b1" in res:
            ort = res["ort_b1"]
            models = ort["models"]
            cells = ", ".join(f"{MODEL_NAMES.get(m, m)} {rng(o['kiln_over_ort_p50'], '{:.3f}', 'x')}"
                              for m, o in models.items())
            match = all(o["outputs_match"] for o in models.values())
            met = all(o["kiln_over_ort_p50"]["median"] <= ort.get("target", 1.0)
                      for o in models.values()) and match
            lines.append(
                f"| `kiln.ort` b1 p50 at or below ONNX Runtime {ort['ort_version']}'s "
                "(intra_op_num_threads=2, 30 runs per round), outputs within rtol 1e-3 / atol 1e-4 | "
                f"{cells}; outputs {'match' if match else 'DIFFER'} | {'yes' if met else 'no'} |")
    return lines


def trace_meta(res):
    models = " ".join(r["model"] for r in res["rows"])
    return (res["date"], res["cpu"] or "unstated",
            [f"`PYTHONPATH=build/release/python bench/trace_overhead.py {models}" +
             (f" --rounds {res['rounds']} --runs {res['runs']}`" if "rounds" in res
              else "` (its defaults: `--rounds 8 --runs 15`)") +
             ("; baseline: " + res["baseline"] if "baseline" in res
              else "; baseline: RunInto into preallocated outputs")])


def trace_body(items):
    lines = ["| model | run p50, untimed (ms) | every step timed / untimed [range] |",
             "|---|---|---|"]
    for _, res in items:
        for r in res["rows"]:
            lines.append(f"| {r['model']} | {r['plain_ms']:.2f} | {r['ratio']:.3f}x "
                         f"[{r['range'][0]:.2f}-{r['range'][1]:.2f}] |")
    return lines


KINDS = {
    "table": (table_meta, table_body),
    "memory": (memory_meta, memory_body),
    "threads": (threads_meta, threads_body),
    "ray": (ray_meta, ray_body),
    "python": (python_meta, python_body),
    "trace_overhead": (trace_meta, trace_body),
}


def kind_of(series, res):
    if "kind" in res:
        return res["kind"]
    if series.startswith("threads_"):
        return "threads"
    if series in KINDS:
        return series
    raise RenderError(f"bench/results/{series}_*.json: no \"kind\" and no renderer for the series")


# ---------------------------------------------------------------------------------------------

def render_block(names, doc_path, files):
    items, kinds = [], set()
    for name in names.split(","):
        if name not in files:
            raise RenderError(f"{os.path.relpath(doc_path, REPO)}: block '{names}': no results file "
                              f"bench/results/{name}_<date>.json")
        path = files[name][-1][1]
        with open(path) as f:
            res = json.load(f)
        kinds.add(kind_of(name, res))
        items.append((path, res))
    if len(kinds) != 1:
        raise RenderError(f"block '{names}': its series are of different kinds {sorted(kinds)}")
    meta, body = KINDS[kinds.pop()]
    dates, machines, cmds, links = [], [], [], []
    for path, res in items:
        date, machine, commands = meta(res)
        for lst, v in ((dates, date), (machines, machine)):
            if v not in lst:
                lst.append(v)
        cmds += [c for c in commands if c not in cmds]
        rel = os.path.relpath(path, os.path.dirname(doc_path))
        links.append(f"[{os.path.basename(path)}]({rel})")
    date = ", ".join("(date unstated)" if d == "unstated" else d for d in dates)
    machine = ", ".join("machine unstated" if m == "unstated" else m for m in machines)
    cmd = "; ".join(c if "`" in c else f"`{c}`" for c in cmds)
    titles = [res["title"] for _, res in items if res.get("title")]
    head = "".join(f"**{t}.** " for t in titles)
    head += f"Measured {date}; {machine}; {cmd}; results: {', '.join(links)}."
    return "\n".join([head, ""] + body(items)) + "\n"


DATE_RE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
RESULTS_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+_20\d\d-[01]\d-[0-3]\d\.json")


def dated_prose(text, rel):
    """Dates in a doc outside its results blocks (a results file's name may carry one): the docs
    are reference pages, and a dated run note belongs in bench/results/ (issue 41)."""
    out = []
    stripped = BLOCK_RE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for n, line in enumerate(stripped.split("\n"), 1):
        if DATE_RE.search(RESULTS_NAME_RE.sub("", line)):
            out.append(f"{rel}:{n}: a date outside a results block (move the figure to bench/results/)")
    return out


def check_markers(text, rel):
    opens, closes = OPEN_RE.findall(text), CLOSE_RE.findall(text)
    if opens != closes:
        raise RenderError(f"{rel}: results markers do not pair up: opened {opens}, closed {closes}")


def process(doc_path, files, stale, errors, shown):
    with open(doc_path) as f:
        text = f.read()
    rel = os.path.relpath(doc_path, REPO)
    try:
        check_markers(text, rel)
    except RenderError as e:
        errors.append(str(e))
        return text, text

    def sub(m):
        names = m.group("names")
        for n in names.split(","):
            shown.setdefault(n, []).append(rel)
        try:
            body = render_block(names, doc_path, files)
        except (RenderError, KeyError, ValueError, TypeError) as e:
            errors.append(f"{rel}: block '{names}': {e}" if not isinstance(e, RenderError) else str(e))
            return m.group(0)
        if body != m.group("body"):
            stale.append(f"{rel}: results block '{names}' is stale")
        return f"<!-- results:{names} -->\n{body}<!-- /results:{names} -->"

    new = BLOCK_RE.sub(sub, text)
    if os.path.dirname(doc_path) == os.path.join(REPO, "docs"):
        errors.extend(dated_prose(new, rel))
    return text, new


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="change nothing; exit 1 naming every block that differs from its render")
    ap.add_argument("--list", action="store_true", help="each series, its latest file, its blocks")
    a = ap.parse_args()
    files = series_files()
    stale, errors, shown, changed = [], [], {}, []
    for doc in docs():
        old, new = process(doc, files, stale, errors, shown)
        if new != old and not a.check:
            with open(doc, "w") as f:
                f.write(new)
            changed.append(os.path.relpath(doc, REPO))
    if a.list:
        for s in sorted(files):
            latest = os.path.basename(files[s][-1][1])
            print(f"{s}: {latest} ({len(files[s])} file(s)); shown in "
                  f"{', '.join(sorted(set(shown.get(s, [])))) or 'no doc'}")
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    if a.check:
        for s in stale:
            print(s + " (run: python3 scripts/render_results.py)", file=sys.stderr)
        if stale or errors:
            return 1
        print(f"results blocks up to date: {sum(len(v) for v in shown.values())} blocks, "
              f"{len(shown)} series")
        return 0
    for c in changed:
        print(f"rewrote {c}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
