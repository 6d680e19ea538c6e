"""Stand-in for accelerate.state (see ../README.md): where Accelerator puts models, from
ACCELERATE_TORCH_DEVICE, else a fixed ladder of devices (default_device)."""

import os

import torch


class PartialState:
    def __init__(self, cpu: bool = False):
        env_device = os.environ.get("ACCELERATE_TORCH_DEVICE", None)
        self.device = torch.device(env_device) if env_device is not None else None
        if self.device is None:
            self.device = torch.device("cpu") if cpu else self.default_device

    @property
    def default_device(self) -> torch.device:
        # accelerate's ladder: mps, mlu, sdaa, musa, npu, hpu, cuda, xpu, neuron, then cpu.
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("cpu")
