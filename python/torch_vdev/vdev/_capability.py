"""The device's capability profile (``VDEV_PROFILE``, cpp/runtime/capability_profile.h) on the
Python side.

What the device is (name, capability, memory) comes from the runtime's device properties, and
what it refuses at a call (a dtype, an operator) is checked in C++ (cpp/backend/checks/
capability_rules.h). Here is what only Python decides: ``is_bf16_supported``,
``get_amp_supported_dtype``, and tensor printing on a device without float64.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from torch_vdev import _C


@dataclass(frozen=True)
class Profile:
    """``id``: "default", "sm75", "sm80", "sm90", "mps" or a JSON file's path; ``bf16_emulated``:
    bfloat16 works but the hardware has no bfloat16 units (a T4); ``unsupported_dtypes``: the
    dtypes the device has no tensors of; ``missing_operators``: the operators it lacks."""

    id: str
    bf16_emulated: bool
    unsupported_dtypes: frozenset[torch.dtype]
    missing_operators: tuple[str, ...]


@functools.cache
def profile() -> Profile:
    """The profile (read once); raises the configuration's RuntimeError if it is malformed."""
    pid, bf16_emulated, dtypes, operators = _C._profile()
    return Profile(
        pid, bf16_emulated, frozenset(getattr(torch, d) for d in dtypes), tuple(operators)
    )


def _tensor_totype(t: torch.Tensor) -> torch.Tensor:
    """torch's printing computes its format on the tensor's device in float64, except on devices
    without float64, which it names (MPS, some XPUs): a vdev device without float64 takes their
    path (float32), so printing works as it does on the described device."""
    if t.device.type == "vdev" and torch.float64 in profile().unsupported_dtypes:
        return t.to(dtype=torch.float)
    return _original_tensor_totype(t)


_original_tensor_totype = torch._tensor_str.tensor_totype


def install() -> None:
    """Printing of vdev tensors follows the profile (registration step; idempotent)."""
    torch._tensor_str.tensor_totype = _tensor_totype
