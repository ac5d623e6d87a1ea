#!/usr/bin/env bash
# README command 1: installs what is needed, builds, then classifies the 10,000 real test photos of
# Fashion-MNIST (Debian's dataset-fashion-mnist) with the bundled CNN (demo/, trained here with
# PyTorch) and prints kiln's accuracy and images per second: once from a tensor file, once from PNG
# files through `kiln run --images`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh > /dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 demo/prepare_data.py "$work"
out=$(build/release/tools/kiln/kiln run demo/fashion_mnist_cnn.onnx --input "$work/images.npy" \
      --output-dir "$work/out" --repeat 5)
echo "$out"
# The steady state: the median of the runs after the first (which prepares the plan).
run_ms=$(sed -n 's/^steady run \([0-9.]*\) ms.*/\1/p' <<< "$out")
/usr/bin/python3 demo/accuracy.py "$work/out/logits.npy" "$work/labels.npy"
awk -v ms="$run_ms" 'BEGIN { printf "throughput: %.0f images/s (10000 images in one batch, %.1f ms, steady state)\n", 10000 / (ms / 1000), ms }'
# The same photos as PNG files through the image job: decode, recipe, batches of 256, records.
/usr/bin/python3 demo/export_images.py "$work/png" > /dev/null
build/release/tools/kiln/kiln run demo/fashion_mnist_cnn.onnx --images "$work/png/images" \
  --recipe fashion-mnist --labels "$work/png/labels.txt" --batch 256 --out "$work/records.jsonl"
head -n 2 "$work/records.jsonl"
/usr/bin/python3 demo/records_accuracy.py "$work/records.jsonl"
