#!/usr/bin/env python3
"""Structure rules of issue 41 that code review alone would let slip back:

- no function in src/runtime/ longer than 80 lines (from its opening brace to its closing one);
- no precision compared as a string anywhere in src/ (Precision is an enum; only the CLI and the
  Python package parse names);
- no device (backend) name compared as a string anywhere in src/: == / != against "cpu" or
  "cuda", or .compare("cpu"/"cuda") (Backend is an enum; ParseBackend reads the names).

usage: check_structure.py [ROOT]   (exit 1 naming each violation)
       check_structure.py --self-test   (the string rules on lines they must and must not flag)
The function finder matches braces after stripping comments, strings and character literals; a
brace that opens at namespace or class level and is not a namespace, class, struct, enum or union
starts a function body.
"""
import glob
import os
import re
import sys

MAX_LINES = 80


def functions(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    stack, out = [], []
    for i, line in enumerate(lines):
        s = re.sub(r"//.*", "", line)
        s = re.sub(r'"(\\.|[^"\\])*"', '""', s)
        s = re.sub(r"'(\\.|[^'\\])'", "''", s)
        for ch in s:
            if ch == "{":
                kinds = [k for k, _ in stack]
                if re.search(r"\bnamespace\b", s) or 'extern "C"' in line:
                    kind = "ns"
                elif re.search(r"\b(class|struct|enum|union)\b", s) and "(" not in s.split("{")[0][-3:]:
                    kind = "cls"
                elif all(k in ("ns", "cls") for k in kinds):
                    kind = "fn"
                else:
                    kind = "block"
                stack.append((kind, i))
            elif ch == "}" and stack:
                kind, start = stack.pop()
                if kind == "fn":
                    out.append((i - start + 1, start + 1))
    return out


PRECISION = re.compile(r"""precision\s*[!=]=\s*"|"(fp32|bf16|fp16)"\s*[!=]=\s*\w*precision""")
DEVICE = re.compile(r'[!=]=\s*"(cpu|cuda)"|"(cpu|cuda)"\s*[!=]=|\.compare\s*\(\s*"(cpu|cuda)"')


def string_comparisons(line):
    """What `line` compares as a string that is an enum in kiln: "precision", "device"."""
    code = re.sub(r"//.*", "", line)
    out = []
    if PRECISION.search(code):
        out.append("precision")
    if DEVICE.search(code):
        out.append("device")
    return out


def self_test():
    must = {
        'if (backend == "cpu") return OkStatus();': ["device"],
        'if ("cuda" != o.backend) {': ["device"],
        'return name.compare("cuda") == 0;': ["device"],
        '  if (a.precision == "fp32") x = 1;': ["precision"],
    }
    must_not = [
        'KernelDef{"cpu.conv.onednn", "Conv", "", 1, 13, Backend::kCpu, 10};',
        'report["cuda"] = Cuda(report["build"], &warnings);',
        'if (backend == Backend::kCuda) return;',
        '// backend == "cpu" in a comment',
        'const std::string name = "cpu." + op;',
    ]
    bad = [f"missed {line!r}" for line, want in must.items() if string_comparisons(line) != want]
    bad += [f"flagged {line!r}" for line in must_not if string_comparisons(line)]
    for b in bad:
        print(b)
    print(f"structure self-test: {len(bad)} failures")
    return 1 if bad else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    bad = []
    for path in sorted(glob.glob(os.path.join(root, "src", "runtime", "*.cc")) +
                       glob.glob(os.path.join(root, "src", "runtime", "*.h"))):
        for n, line in functions(path):
            if n > MAX_LINES:
                bad.append(f"{os.path.relpath(path, root)}:{line}: a function of {n} lines "
                           f"(at most {MAX_LINES} in src/runtime/)")
    for path in sorted(glob.glob(os.path.join(root, "src", "**", "*.*"), recursive=True)):
        if not path.endswith((".cc", ".h", ".cu")):
            continue
        for k, line in enumerate(open(path, encoding="utf-8"), 1):
            for what in string_comparisons(line):
                bad.append(f"{os.path.relpath(path, root)}:{k}: {what} compared as a string")
    for b in bad:
        print(b)
    print(f"structure: {len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
