"""Helpers of ``torch.vdev`` (the counterpart of ``torch/cuda/_utils.py``)."""

from __future__ import annotations

from typing import Any

import torch

from torch_vdev import _C


def _get_device_index(device: Any, optional: bool = False, fn: str = "device") -> int:
    """The device index named by ``device``, as ``torch.cuda._utils._get_device_index``.

    ``device`` is an int (numpy integers too), a ``"vdev"``/``"vdev:N"`` string, a
    ``torch.device`` of type vdev, a ``torch.vdev.device`` context manager, or ``None``. ``None``
    and a device without an index mean the current device when ``optional`` is true and are a
    ``ValueError`` otherwise. A negative int is returned as is (callers treat -1 as "none"). The
    parsing itself is native (``_C._device_index``), shared with ``torch.vdev.set_device``;
    errors name ``fn`` and the value.
    """
    from torch_vdev.vdev import device as device_context  # the package imports this module

    if isinstance(device, device_context):
        return device.idx
    index = _C._device_index(device, fn)  # None: no index named
    if index is not None:
        return index
    if optional:
        return _C._get_device()
    raise ValueError(f"[{fn}] expected a vdev device with an index or an integer, got {device}")


def _traced_device_args(device: Any) -> tuple[torch.device, ...]:
    """``device`` as the arguments of ``torch.accelerator``'s functions, for the calls Dynamo
    traces in place of torch.vdev's (torch.compile knows torch.accelerator's streams and
    synchronize; it cannot trace into the native functions torch.vdev calls): none for None
    (Dynamo refuses an explicit None), an int as a vdev index."""
    if device is None:
        return ()
    if isinstance(device, int):
        return (torch.device("vdev", device),)
    return (torch.device(device),)
