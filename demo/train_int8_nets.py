#!/usr/bin/python3
"""Train the INT8 accuracy nets on Fashion-MNIST and export them to ONNX (opset 13).

usage: /usr/bin/python3 demo/train_int8_nets.py --arch resnet|mobilenetv2 [--epochs 3] [--out F]

resnet:      a small ResNet: 3x3 stem (24), three stages of two basic blocks (24, 48, 96 channels,
             stride 2 at stages 2 and 3), BatchNorm, ReLU, residual adds, global average pool, FC.
mobilenetv2: a small MobileNetV2: 3x3 stem (16), inverted residual blocks (1x1 expand x4,
             3x3 depthwise, 1x1 project, ReLU6, residual where shapes allow) at 16/24/32/64
             channels, 1x1 head (128), global average pool, FC. Depthwise convolutions are what
             per-tensor weight scales ruin, so this is the per-channel scheme's test.
Data: Debian's dataset-fashion-mnist, normalised as the demo's CNN ((x/255 - 0.2860)/0.3530);
one CPU thread, fixed seeds, deterministic algorithms: reruns give the same weights.
Training: Adam with a one-cycle schedule (max 2e-3), batch 64, light augmentation (random
horizontal flips), BatchNorm folded by the exporter.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from train_fashion_mnist import evaluate, setup, train  # noqa: E402


def conv_bn(cin, cout, k=3, stride=1, groups=1, act=nn.ReLU):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
              nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.a = conv_bn(cin, cout, 3, stride)
        self.b = conv_bn(cout, cout, 3, 1, act=None)
        self.short = (conv_bn(cin, cout, 1, stride, act=None)
                      if stride != 1 or cin != cout else nn.Identity())
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.b(self.a(x)) + self.short(x))


class ResNetStyle(nn.Module):
    def __init__(self, widths=(24, 48, 96)):
        super().__init__()
        layers = [conv_bn(1, widths[0])]
        cin = widths[0]
        for i, w in enumerate(widths):
            layers += [BasicBlock(cin, w, 1 if i == 0 else 2), BasicBlock(w, w, 1)]
            cin = w
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand=4):
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.block = nn.Sequential(
            conv_bn(cin, hidden, 1, act=nn.ReLU6),
            conv_bn(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6),
            conv_bn(hidden, cout, 1, act=None))

    def forward(self, x):
        y = self.block(x)
        return x + y if self.use_res else y


class MobileNetV2Style(nn.Module):
    def __init__(self):
        super().__init__()
        cfg = [(16, 1, 1), (24, 2, 2), (32, 2, 2), (64, 2, 1)]  # (channels, blocks, stride)
        layers = [conv_bn(1, 16, act=nn.ReLU6)]
        cin = 16
        for c, n, s in cfg:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1))
                cin = c
        layers.append(conv_bn(cin, 128, 1, act=nn.ReLU6))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", required=True, choices=["resnet", "mobilenetv2"])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out")
    a = p.parse_args()
    out = a.out or os.path.join(HERE, f"fmnist_{a.arch}.onnx")
    xtr, ytr, xte, yte = setup(a.seed)
    model = ResNetStyle() if a.arch == "resnet" else MobileNetV2Style()
    print(f"{a.arch}: {sum(p.numel() for p in model.parameters())} parameters", flush=True)
    train(model, xtr, ytr, xte, yte, a.epochs, a.batch, a.lr, a.seed, flip=True)
    model.eval()
    acc = evaluate(model, xte, yte)
    print(f"final torch test accuracy: {acc * 100:.2f}% ({round(acc * 10000)}/10000)")
    with torch.no_grad():
        torch.onnx.export(model, xte[:1], out, opset_version=13, input_names=["input"],
                          output_names=["logits"],
                          dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
    print(f"exported {out} ({os.path.getsize(out)} bytes)")


if __name__ == "__main__":
    main()
