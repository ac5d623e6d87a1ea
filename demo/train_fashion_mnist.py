#!/usr/bin/python3
"""Train a small CNN on Fashion-MNIST and export it to ONNX (opset 13).

usage: /usr/bin/python3 demo/train_fashion_mnist.py [--epochs 3] [--out demo/fashion_mnist_cnn.onnx]

Data: Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist, MIT licence).
Input normalisation: (x/255 - 0.2860)/0.3530, shape [N,1,28,28]; output "logits" [N,10].
Runs on one CPU thread with fixed seeds, so reruns give the same weights.
"""
import argparse
import os
import random
import sys
import time

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fmnist_data import load_split, normalize  # noqa: E402

CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]


class SmallCNN(nn.Module):
    def __init__(self, c1=16, c2=32, hidden=128):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, c1, 3, padding=1, bias=False), nn.BatchNorm2d(c1), nn.ReLU(),
            nn.MaxPool2d(2),                                   # 14x14
            nn.Conv2d(c1, c2, 3, padding=1, bias=False), nn.BatchNorm2d(c2), nn.ReLU(),
            nn.MaxPool2d(2),                                   # 7x7
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(c2 * 7 * 7, hidden), nn.ReLU(), nn.Dropout(0.25),
            nn.Linear(hidden, 10),
        )

    def forward(self, x):
        return self.classifier(self.features(x))


def evaluate(model, x, y, batch=1000):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, x.shape[0], batch):
            correct += int((model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum())
    return correct / x.shape[0]


def setup(seed):
    """One CPU thread, fixed seeds, deterministic algorithms; the normalised train and test sets
    as tensors (xtr, ytr, xte, yte)."""
    torch.set_num_threads(1)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    tr_img, tr_lab = load_split("train")
    te_img, te_lab = load_split("t10k")
    return (torch.from_numpy(normalize(tr_img)), torch.from_numpy(tr_lab),
            torch.from_numpy(normalize(te_img)), torch.from_numpy(te_lab))


def train(model, xtr, ytr, xte, yte, epochs, batch, lr, seed, flip=False):
    """Adam with a one-cycle schedule (max 2 * lr); `flip`: random horizontal flips (drawn from
    the same seeded generator as the batch order). Prints each epoch's loss and test accuracy."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    steps_per_epoch = (xtr.shape[0] + batch - 1) // batch
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr * 2, epochs=epochs,
                                                steps_per_epoch=steps_per_epoch)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(seed)
    t0 = time.time()
    for ep in range(epochs):
        model.train()
        perm = torch.randperm(xtr.shape[0], generator=gen)
        total = 0.0
        for i in range(0, xtr.shape[0], batch):
            idx = perm[i:i + batch]
            xb = xtr[idx]
            if flip:
                f = torch.rand(xb.shape[0], generator=gen) < 0.5
                xb = torch.where(f[:, None, None, None], xb.flip(3), xb)
            opt.zero_grad()
            loss = loss_fn(model(xb), ytr[idx])
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss) * idx.shape[0]
        acc = evaluate(model, xte, yte)
        print(f"epoch {ep + 1}/{epochs}: train loss {total / xtr.shape[0]:.4f}, "
              f"test acc {acc * 100:.2f}%, elapsed {time.time() - t0:.1f}s", flush=True)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=os.path.join(here, "fashion_mnist_cnn.onnx"))
    a = p.parse_args()

    xtr, ytr, xte, yte = setup(a.seed)
    print(f"train {tuple(xtr.shape)}, test {tuple(xte.shape)}", flush=True)

    model = SmallCNN()
    nparams = sum(p.numel() for p in model.parameters())
    print(f"parameters: {nparams}", flush=True)
    train(model, xtr, ytr, xte, yte, a.epochs, a.batch, a.lr, a.seed)

    model.eval()
    acc = evaluate(model, xte, yte)
    print(f"final torch test accuracy: {acc * 100:.2f}% ({round(acc * 10000)}/10000)")

    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(model, xte[:1], a.out, opset_version=13,
                          input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
    import onnx
    m = onnx.load(a.out)
    onnx.checker.check_model(m)
    ops = {}
    for n in m.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    print(f"exported {a.out} ({os.path.getsize(a.out)} bytes), ops: {ops}")


if __name__ == "__main__":
    main()
