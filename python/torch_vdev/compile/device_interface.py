"""Dynamo's device interface for vdev: what ``torch.compile`` asks of a device.

Dynamo traces ``torch.vdev`` streams, events and synchronize calls through it (as it does
CUDA's), and Inductor uses it for the current device, streams, properties and timing. Every member
is the real ``torch.vdev`` function; nothing is a stub.
"""

from __future__ import annotations

from typing import Any

import torch

from torch_vdev import _C
from torch_vdev import vdev as _vdev
from torch_vdev.compile import torch_internals
from torch_vdev.vdev._utils import _get_device_index

DeviceInterface = torch_internals.get("torch._dynamo.device_interface.DeviceInterface")
caching_worker_current_devices = torch_internals.get(
    "torch._dynamo.device_interface.caching_worker_current_devices"
)
caching_worker_device_properties = torch_internals.get(
    "torch._dynamo.device_interface.caching_worker_device_properties"
)


class VdevInterface(DeviceInterface):
    device = _vdev.device  # type: ignore[assignment]
    Event = _vdev.Event  # type: ignore[assignment]
    Stream = _vdev.Stream  # type: ignore[assignment]

    class Worker:
        """Queries that work in Inductor's compile workers (subprocesses that must not use the
        device): properties are recorded in the main process before the workers start."""

        @staticmethod
        def set_device(device: int) -> None:
            caching_worker_current_devices["vdev"] = device

        @staticmethod
        def current_device() -> int:
            if "vdev" in caching_worker_current_devices:
                return caching_worker_current_devices["vdev"]
            return _vdev.current_device()

        @staticmethod
        def get_device_properties(device: Any = None) -> Any:
            if device is None:
                device = VdevInterface.Worker.current_device()
            else:
                device = _get_device_index(device, optional=True, fn="get_device_properties")
            if "vdev" not in caching_worker_device_properties:
                caching_worker_device_properties["vdev"] = [
                    _vdev.get_device_properties(i) for i in range(_vdev.device_count())
                ]
            return caching_worker_device_properties["vdev"][device]

    current_device = staticmethod(_vdev.current_device)
    set_device = staticmethod(_vdev.set_device)
    device_count = staticmethod(_vdev.device_count)
    stream = staticmethod(_vdev.stream)  # type: ignore[assignment]
    current_stream = staticmethod(_vdev.current_stream)
    set_stream = staticmethod(_vdev.set_stream)  # type: ignore[assignment]
    synchronize = staticmethod(_vdev.synchronize)
    get_device_properties = staticmethod(_vdev.get_device_properties)  # type: ignore[assignment]
    exchange_device = staticmethod(_C._exchange_device)
    maybe_exchange_device = staticmethod(_C._maybe_exchange_device)
    memory_allocated = staticmethod(_vdev.memory_allocated)
    is_bf16_supported = staticmethod(_vdev.is_bf16_supported)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        torch.accelerator.set_stream(
            torch.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)
        )

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        """The current stream of ``device_idx`` as an integer handle (as a cudaStream_t)."""
        return _C._current_raw_stream(device_idx)

    @staticmethod
    def is_available() -> bool:
        return _vdev.is_available()

    @staticmethod
    def get_compute_capability(device: Any = None) -> int:
        major, minor = _vdev.get_device_capability(device)
        return major * 10 + minor

    @staticmethod
    def is_triton_capable(device: Any = None) -> bool:
        return False  # vdev kernels are Inductor's C++ kernels

    @staticmethod
    def raise_if_triton_unavailable(device: Any = None) -> None:
        raise RuntimeError(
            "vdev runs Inductor's C++ kernels, not Triton (torch.compile picks them itself)"
        )


def register() -> None:
    """Registers the interface for "vdev" and each "vdev:N", as Dynamo does for CUDA, and makes
    ``torch.vdev.Stream`` and ``Event`` classes Dynamo creates in the graph, as it does
    ``torch.cuda.Stream`` and ``Event``: Dynamo lists those (and torch.hpu's) by name, with no
    registration for other devices, so vdev adds its classes to that list."""
    register_interface_for_device = torch_internals.get(
        "torch._dynamo.device_interface.register_interface_for_device"
    )
    in_graph_classes = torch_internals.get(
        "torch._dynamo.variables.user_defined.UserDefinedClassVariable._in_graph_classes"
    )
    register_interface_for_device("vdev", VdevInterface)
    for i in range(_vdev.device_count()):
        register_interface_for_device(f"vdev:{i}", VdevInterface)
    in_graph_classes().update({_vdev.Stream, _vdev.Event})
    from torch_vdev.compile import fake_layouts

    fake_layouts.apply()
