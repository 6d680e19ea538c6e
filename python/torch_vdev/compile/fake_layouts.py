"""Fake tensors of vdev convolutions get the memory format vdev's convolution gives.

torch.compile predicts every output's layout with fake tensors, and the generated code asserts
it. For a PrivateUse1 device, torch's fake convolution (``torch._subclasses.fake_impls.conv``)
asks ``_select_conv_backend``, which answers ``Overrideable``, and
``_conv_determine_backend_memory_format`` gives Overrideable devices a contiguous output. vdev's
convolution keeps CUDA's rule (cpp/backend/executor/allocated_layouts.cpp: channels-last when the
input or the weight is), so a channels-last convolution compiled on vdev failed its stride
assertion. torch has no per-device hook for this rule; vdev wraps the fake convolution of the four
convolution operators to apply its own rule to vdev tensors (other devices are untouched).
"""

from __future__ import annotations

from typing import Any

import torch

from torch_vdev.compile import torch_internals

_TABLE = "torch._subclasses.fake_impls.op_implementations_dict"
_applied = False


def conv_memory_format(input_: torch.Tensor, weight: torch.Tensor) -> torch.memory_format:
    """cpp/backend/executor/allocated_layouts.cpp's conv_memory_format."""
    suggest_memory_format = torch_internals.get("torch._prims_common.suggest_memory_format")
    formats = (suggest_memory_format(input_), suggest_memory_format(weight))
    for fmt in (torch.channels_last, torch.channels_last_3d):
        if fmt in formats:
            return fmt
    return torch.contiguous_format


def apply() -> None:
    global _applied
    if _applied:
        return
    table = torch_internals.get(_TABLE)
    normalize = torch_internals.get("torch._subclasses.fake_impls._normalize_function_or_error")
    has_guarding_hint = torch_internals.get(
        "torch.fx.experimental.symbolic_shapes.has_guarding_hint"
    )

    aten = torch.ops.aten
    ops = (
        aten.convolution.default,
        aten._convolution.default,
        aten._convolution.deprecated,
        aten.convolution_backward.default,
    )
    original = table[aten.convolution.default]

    def conv(fake_mode: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(fake_mode, func, *args, **kwargs)
        _, named = normalize(func, args=args, kwargs=kwargs, normalize_to_only_use_kwargs=True)
        input_, weight = named["input"], named["weight"]
        if input_.fake_device.type != "vdev" or not all(
            has_guarding_hint(s) for s in (*input_.shape, *weight.shape)
        ):
            return out
        with fake_mode:
            fmt = conv_memory_format(input_, weight)
            if func is aten.convolution_backward.default:
                grad_input, grad_weight, grad_bias = out
                return (
                    None if grad_input is None else grad_input.clone(memory_format=fmt),
                    None if grad_weight is None else grad_weight.clone(memory_format=fmt),
                    grad_bias,
                )
            return out.clone(memory_format=fmt)

    for op in ops:
        if table.get(op) is not original:
            raise RuntimeError(f"torch_vdev: torch's fake {op} is not the one vdev wraps")
        torch_internals.patch_item(_TABLE, op, conv)
    _applied = True
