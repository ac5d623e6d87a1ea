#!/usr/bin/python3
"""Print top-1 accuracy of `kiln run --images` records on the folders of export_images.py.

usage: /usr/bin/python3 demo/records_accuracy.py RECORDS.jsonl
The true class of each record is the number before '_' in its image's folder name. A record
with an error counts as wrong. Exits 2 when there are no records.
"""
import json
import os
import sys


def main():
    correct = n = errors = 0
    with open(sys.argv[1]) as f:
        for line in f:
            r = json.loads(line)
            n += 1
            truth = int(os.path.basename(os.path.dirname(r["path"])).split("_")[0])
            if "error" in r:
                errors += 1
            elif r["top_k"][0] == truth:
                correct += 1
    if n == 0:
        print("no records", file=sys.stderr)
        return 2
    print(f"top-1 accuracy: {100.0 * correct / n:.2f}% ({correct}/{n}), {errors} errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
