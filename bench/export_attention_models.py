#!/usr/bin/python3
"""Runs ../shared/bench/export_torchvision.py for torchvision models with attention (vit_*).

PyTorch 1.13's nn.MultiheadAttention takes a fused fast path without autograd
(aten::_native_multi_head_attention), which the ONNX exporter cannot write; the export is
therefore run with autograd enabled, which keeps the plain ops. Arguments as the shared script's.
Needs Debian's python3-torch; run with /usr/bin/python3.
"""
import os
import runpy
import sys

import torch

SHARED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "bench",
                      "export_torchvision.py")
_export = torch.onnx.export


def export(*args, **kwargs):
    with torch.enable_grad():
        return _export(*args, **kwargs)


torch.onnx.export = export
sys.argv = [SHARED] + sys.argv[1:]
runpy.run_path(SHARED, run_name="__main__")
