"""python -m kiln.ray MODEL --images URI --out DIR [...]: the batch job on a Ray cluster.

Exit status: 0 when every part is committed, 3 when some are not after --attempts rounds (run the
same command again to finish them), 1 on a kiln error (bad model, recipe, labels, listing or
settings), 2 on bad options.
"""
import argparse
import json
import sys

import kiln
from kiln.ray import run_job


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m kiln.ray",
        description="Classify (or run) every image of a folder, list file or bucket with kiln on "
        "a Ray cluster, one committed Parquet or JSON Lines file per part (docs/ray.md).")
    p.add_argument("model", help="the ONNX model (a path every node can read)")
    p.add_argument("--images", required=True,
                   help="a folder, a list file, or a URI (s3://, gs://, hdfs://)")
    p.add_argument("--out", required=True, help="output folder or URI (parts and the manifest)")
    p.add_argument("--recipe", default="", help="preset or recipe .json (kiln run --images)")
    p.add_argument("--labels", default=None, help="class names, one per line")
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--batch", type=int, default=32, help="images per model run (default 32)")
    p.add_argument("--actors", type=int, default=None,
                   help="actors (default: the cluster's CPUs / --cpus-per-actor)")
    p.add_argument("--cpus-per-actor", type=int, default=1,
                   help="CPUs (compute and decode threads) per actor (default 1)")
    p.add_argument("--part-size", type=int, default=None,
                   help="images per committed part file (default: about 8 parts per actor, "
                   "16 to 1024 images; a rerun keeps the first run's parts)")
    p.add_argument("--format", choices=("parquet", "jsonl"), default="parquet")
    p.add_argument("--address", default=None,
                   help="the Ray cluster (auto, or host:port); default: start a local one")
    p.add_argument("--attempts", type=int, default=3,
                   help="rounds over parts left undone by a failed Ray run (default 3)")
    p.add_argument("--overwrite", action="store_true",
                   help="delete the output folder's parts and manifest and start over")
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", default="fp32")
    p.add_argument("--json", default=None, help="also write the summary to this file")
    a = p.parse_args(argv)
    try:
        s = run_job(a.model, a.images, a.out, recipe=a.recipe, labels=a.labels, top_k=a.top_k,
                    batch=a.batch, actors=a.actors, cpus_per_actor=a.cpus_per_actor,
                    part_size=a.part_size, fmt=a.format, address=a.address,
                    attempts=a.attempts, overwrite=a.overwrite, device=a.device,
                    precision=a.precision,
                    log=lambda m: print(m, file=sys.stderr, flush=True))
    except kiln.Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps({k: v for k, v in s.items() if k != "rss_bytes"}))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(s, f, indent=1)
    return 3 if s["parts_missing"] else 0


if __name__ == "__main__":
    sys.exit(main())
