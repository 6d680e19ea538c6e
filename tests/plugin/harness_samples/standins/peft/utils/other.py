"""Stand-in for peft.utils.other (see ../../README.md)."""

import torch


def infer_device() -> str:
    # PEFT's ladder: cuda, mps, mlu, xpu, npu, then cpu.
    if torch.cuda.is_available():
        return "cuda"
    return "cpu"
