"""Shared helpers for reading Debian's Fashion-MNIST idx files (dataset-fashion-mnist package)."""
import gzip
import os

import numpy as np

DATA_DIR = "/usr/share/datasets/fashion-mnist"
MEAN = 0.2860
STD = 0.3530


def read_idx(path):
    """Parse an idx1/idx3 file (optionally gzip-compressed) into a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte idx file")
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if arr.size != int(np.prod(dims)):
        raise ValueError(f"{path}: expected {dims}, got {arr.size} bytes")
    return arr.reshape(dims)


def load_split(split, data_dir=DATA_DIR):
    """split is 'train' or 't10k'. Returns (uint8 images [N,28,28], int64 labels [N])."""
    images = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz")).astype(np.int64)
    if images.shape[0] != labels.shape[0]:
        raise ValueError("image/label count mismatch")
    return images, labels


def normalize(images_u8):
    """uint8 [N,28,28] -> float32 [N,1,28,28], (x/255 - MEAN)/STD."""
    x = images_u8.astype(np.float32) / np.float32(255.0)
    x = (x - np.float32(MEAN)) / np.float32(STD)
    return np.ascontiguousarray(x[:, None, :, :], dtype=np.float32)
