#!/usr/bin/python3
"""Exports a YOLOv8n-like network to ONNX (for benchmarks; no YOLO weights or code can be fetched
here): the same block types and widths as YOLOv8n's backbone and neck (Conv = Conv2d+BN+SiLU,
C2f with its channel Split and Concat, SPPF with three chained MaxPools, nearest Upsample x2 and
Concat in the neck) and a plain convolutional head per scale, with seeded random weights and
BatchNorm statistics. Written from the published architecture, not from Ultralytics' code.

usage: bench/yolo_like.py OUT.onnx [--size 640] [--opset 13]
Input "images" [N,3,size,size] (dynamic N); output "preds" [N, 144, anchors].
Run with /usr/bin/python3 (Debian's python3-torch).
"""
import argparse

import torch
import torch.nn as nn


class Conv(nn.Module):
    def __init__(self, c1, c2, k=1, s=1):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c, shortcut):
        super().__init__()
        self.cv1, self.cv2, self.add = Conv(c, c, 3), Conv(c, c, 3), shortcut

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C2f(nn.Module):
    def __init__(self, c1, c2, n, shortcut):
        super().__init__()
        self.c = c2 // 2
        self.cv1 = Conv(c1, 2 * self.c)
        self.cv2 = Conv((2 + n) * self.c, c2)
        self.m = nn.ModuleList(Bottleneck(self.c, shortcut) for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).split((self.c, self.c), 1))
        for m in self.m:
            y.append(m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, c1, c2):
        super().__init__()
        c = c1 // 2
        self.cv1, self.cv2 = Conv(c1, c), Conv(4 * c, c2)
        self.m = nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))


class YoloLike(nn.Module):
    def __init__(self):
        super().__init__()
        self.b0, self.b1 = Conv(3, 16, 3, 2), Conv(16, 32, 3, 2)
        self.b2, self.b3 = C2f(32, 32, 1, True), Conv(32, 64, 3, 2)
        self.b4, self.b5 = C2f(64, 64, 2, True), Conv(64, 128, 3, 2)
        self.b6, self.b7 = C2f(128, 128, 2, True), Conv(128, 256, 3, 2)
        self.b8, self.b9 = C2f(256, 256, 1, True), SPPF(256, 256)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.n12, self.n15 = C2f(384, 128, 1, False), C2f(192, 64, 1, False)
        self.n16, self.n18 = Conv(64, 64, 3, 2), C2f(192, 128, 1, False)
        self.n19, self.n21 = Conv(128, 128, 3, 2), C2f(384, 256, 1, False)
        self.heads = nn.ModuleList(
            nn.Sequential(Conv(c, 64, 3), Conv(64, 64, 3), nn.Conv2d(64, 144, 1))
            for c in (64, 128, 256))

    def forward(self, x):
        p3 = self.b4(self.b3(self.b2(self.b1(self.b0(x)))))
        p4 = self.b6(self.b5(p3))
        p5 = self.b9(self.b8(self.b7(p4)))
        n12 = self.n12(torch.cat((self.up(p5), p4), 1))
        n15 = self.n15(torch.cat((self.up(n12), p3), 1))
        n18 = self.n18(torch.cat((self.n16(n15), n12), 1))
        n21 = self.n21(torch.cat((self.n19(n18), p5), 1))
        outs = [h(f).flatten(2) for h, f in zip(self.heads, (n15, n18, n21))]
        return torch.cat(outs, 2).sigmoid()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--size", type=int, default=640)
    p.add_argument("--opset", type=int, default=13)
    a = p.parse_args()
    torch.manual_seed(0)
    m = YoloLike().eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.weight.copy_(0.5 + torch.rand(mod.weight.shape, generator=g))
                mod.bias.copy_(0.1 * torch.randn(mod.bias.shape, generator=g))
                mod.running_mean.copy_(0.1 * torch.randn(mod.running_mean.shape, generator=g))
                mod.running_var.copy_(0.5 + torch.rand(mod.running_var.shape, generator=g))
    x = torch.randn(1, 3, a.size, a.size)
    torch.onnx.export(m, x, a.out, opset_version=a.opset, input_names=["images"],
                      output_names=["preds"], dynamic_axes={"images": {0: "N"}, "preds": {0: "N"}})
    print(a.out)


if __name__ == "__main__":
    main()
