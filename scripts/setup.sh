#!/usr/bin/env bash
# Installs every Debian package kiln's build, tests and demo need. Idempotent: packages already
# present are skipped, and `apt-get update` runs at most once per invocation (only when something
# is missing).
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config patchelf debootstrap
  clang libclang-rt-dev libomp-dev
  libprotobuf-dev protobuf-compiler libonnx-dev
  libdnnl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev
  libonnx-testdata
  python3 python3-venv python3-pip python3-numpy python3-onnx python3-torch python3-torchvision
  libturbojpeg0-dev libpng-dev libre2-dev python3-pil python3-skimage fonts-dejavu-core wamerican
  python3-dev python3-opencv python3-pyclipper python3-shapely
  libboost-dev prometheus-cpp-dev libgrpc++-dev protobuf-compiler-grpc libssl-dev chromium
  dataset-fashion-mnist
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
