"""Stand-in for safetensors.torch (see ../README.md): load_file parses the device itself, as
safetensors' Rust core does, and knows the devices it lists, no PrivateUse1 device."""

import pickle

from . import SafetensorError

_KNOWN = ("cpu", "cuda", "mps", "npu", "xpu", "xla", "mlu", "musa", "hpu")


def save_file(tensors, filename):
    with open(filename, "wb") as f:
        pickle.dump({name: t.cpu() for name, t in tensors.items()}, f)


def load_file(filename, device="cpu"):
    if str(device).split(":")[0] not in _KNOWN:
        raise SafetensorError(f"device {device} is invalid")
    with open(filename, "rb") as f:
        return {name: t.to(device) for name, t in pickle.load(f).items()}
