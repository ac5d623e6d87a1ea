#!/usr/bin/env python3
"""Structure rules of issue 41 that code review alone would let slip back:

- no function in src/runtime/ longer than 80 lines (from its opening brace to its closing one);
- no precision compared as a string anywhere in src/ (Precision is an enum; only the CLI and the
  Python package parse names).

usage: check_structure.py [ROOT]   (exit 1 naming each violation)
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


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    bad = []
    for path in sorted(glob.glob(os.path.join(root, "src", "runtime", "*.cc")) +
                       glob.glob(os.path.join(root, "src", "runtime", "*.h"))):
        for n, line in functions(path):
            if n > MAX_LINES:
                bad.append(f"{os.path.relpath(path, root)}:{line}: a function of {n} lines "
                           f"(at most {MAX_LINES} in src/runtime/)")
    pattern = re.compile(r"""precision\s*[!=]=\s*"|"(fp32|bf16|fp16)"\s*[!=]=\s*\w*precision""")
    for path in sorted(glob.glob(os.path.join(root, "src", "**", "*.*"), recursive=True)):
        if not path.endswith((".cc", ".h", ".cu")):
            continue
        for k, line in enumerate(open(path, encoding="utf-8"), 1):
            if pattern.search(line):
                bad.append(f"{os.path.relpath(path, root)}:{k}: precision compared as a string")
    for b in bad:
        print(b)
    print(f"structure: {len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
