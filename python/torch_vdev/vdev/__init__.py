"""``torch.vdev``: the device module of the vdev backend, following ``torch.cuda`` names.

Device selection is per thread: each thread starts on device 0, and ``set_device`` or the
``device`` context manager changes only the calling thread's current device.

Differences from ``torch.cuda``, each on purpose:
* ``set_device`` with a negative index raises ``ValueError`` (CUDA silently ignores it).
* An index out of range raises ``IndexError`` naming the valid range.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from torch_vdev import _C
from torch_vdev.vdev import (
    _capability,
    sanitizer,  # noqa: F401  (torch.vdev.sanitizer)
)
from torch_vdev.vdev._sharing import ipc_collect
from torch_vdev.vdev._utils import _get_device_index, _traced_device_args
from torch_vdev.vdev.graphs import (
    VdevGraph,
    graph,
    graph_pool_handle,
    is_current_stream_capturing,
)
from torch_vdev.vdev.memory import (
    empty_cache,
    empty_host_cache,
    get_per_process_memory_fraction,
    host_memory_stats,
    max_memory_allocated,
    max_memory_cached,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_cached,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_stats_as_nested_dict,
    memory_summary,
    reset_accumulated_host_memory_stats,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_max_memory_cached,
    reset_peak_host_memory_stats,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)
from torch_vdev.vdev.random import (
    _default_generators,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from torch_vdev.vdev.streams import (
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)

__all__ = [
    "OutOfMemoryError",
    "VdevGraph",
    "graph",
    "graph_pool_handle",
    "is_current_stream_capturing",
    "can_device_access_peer",
    "default_generators",
    "get_amp_supported_dtype",
    "get_rng_state",
    "get_rng_state_all",
    "init",
    "initial_seed",
    "ipc_collect",
    "is_bf16_supported",
    "seed",
    "seed_all",
    "set_rng_state",
    "set_rng_state_all",
    "Event",
    "Stream",
    "StreamContext",
    "VdevDeviceProperties",
    "current_stream",
    "default_stream",
    "set_stream",
    "stream",
    "current_device",
    "device",
    "device_count",
    "device_of",
    "empty_cache",
    "empty_host_cache",
    "host_memory_stats",
    "reset_accumulated_host_memory_stats",
    "reset_peak_host_memory_stats",
    "get_per_process_memory_fraction",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_summary",
    "memory_cached",
    "max_memory_cached",
    "memory_stats_as_nested_dict",
    "reset_max_memory_allocated",
    "reset_max_memory_cached",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
    "set_per_process_memory_fraction",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "is_available",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "set_device",
    "synchronize",
    "set_sync_debug_mode",
    "get_sync_debug_mode",
]

# The hot-path functions are the native functions themselves: a Python wrapper would cost more
# than the call (see benchmarks/bench_device.py).
# Their docstrings are set in bindings/device.cpp.
current_device = _C._get_device
set_device = _C._set_device

# Inductor's code generation for vdev is registered by torch_vdev.compile (a post-import hook),
# not through attributes of this module: torch.vdev does not import torch.compile's support.


def is_available() -> bool:
    """Returns whether at least one vdev device exists (never raises)."""
    return _C._is_available()


# torch.cuda's name for the error an allocation beyond a device's memory raises.
OutOfMemoryError = torch.OutOfMemoryError

# The default generator of each device; filled by initialisation, as torch.cuda.default_generators.
default_generators: tuple[torch.Generator, ...] = ()

_initialized = False
_init_lock = threading.Lock()


def _lazy_init() -> None:
    """Initialises vdev once (torch.cuda's lazy-initialisation contract).

    PyTorch calls it before the first vdev tensor is made (``torch.utils`` device_lazy_init calls
    the device module's ``_lazy_init``); ``init``, ``get_rng_state`` and ``initial_seed`` call it
    too. Afterwards ``is_initialized()`` is true and ``_initialized`` is set, which
    ``torch.utils.checkpoint`` reads to decide whether to save and restore vdev RNG states. It
    raises in a child forked after vdev was used, and reports a malformed configuration.
    """
    global _initialized, default_generators
    if _initialized:
        return
    with _init_lock:
        if _initialized:
            return
        if _is_in_bad_fork():
            raise RuntimeError(
                "Cannot re-initialize vdev in forked subprocess. To use vdev with "
                "multiprocessing, you must use the 'spawn' start method"
            )
        default_generators = _default_generators()
        _initialized = True


def init() -> None:
    """Initialises vdev (a no-op when it already is), as ``torch.cuda.init``."""
    _lazy_init()


def is_initialized() -> bool:
    """Whether vdev has been initialised in this process (see ``_lazy_init``)."""
    return _initialized and not _is_in_bad_fork()


def can_device_access_peer(device: Any, peer_device: Any) -> bool:
    """Whether ``device`` can reach ``peer_device``'s memory directly: true for any two vdev
    devices (copies between them run on the devices' streams without the host)."""
    count = _C._get_device_count()
    for d in (device, peer_device):
        index = _get_device_index(d, optional=False, fn="can_device_access_peer")
        if not 0 <= index < count:
            raise IndexError(
                f"[can_device_access_peer] device index {index} out of range: {count} vdev "
                f"devices (0..{count - 1})"
            )
    return True


def get_amp_supported_dtype() -> list[torch.dtype]:
    """The dtypes ``torch.autocast("vdev")`` accepts (the AMP device contract): every floating
    dtype the device has, as ``torch.autocast("cuda")``, which checks none (float32 autocast is a
    common way to switch lower precision off without removing the context). With
    ``VDEV_PROFILE=mps``, MPS's: float16 and bfloat16 (torch.autocast warns and disables itself
    for any other, as on MPS)."""
    p = _capability.profile()
    dtypes = [torch.float16, torch.bfloat16]
    if p.id != "mps":
        dtypes += [torch.float32, torch.float64]
    return [d for d in dtypes if d not in p.unsupported_dtypes]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether the device supports bfloat16, as ``torch.cuda.is_bf16_supported``: False when no
    device is available or the device has no bfloat16 (``VDEV_PROFILE``); else True, except that
    a device that only emulates it (``VDEV_PROFILE=sm75``, a T4) is True only
    ``including_emulation``, as CUDA answers on a T4 (where it finds a bfloat16 tensor can be
    made)."""
    if not is_available():
        return False
    p = _capability.profile()
    if torch.bfloat16 in p.unsupported_dtypes:
        return False
    return including_emulation or not p.bf16_emulated


def device_count() -> int:
    """Returns the number of vdev devices (``VDEV_DEVICE_COUNT``, default 2).

    Never raises, like ``torch.cuda.device_count`` (``torch.accelerator.device_count`` relies on
    it): if the configuration is malformed it warns with the cause and returns 0, and every real
    use of a device (``set_device``, creating a tensor) raises that error.
    """
    error = _C._config_error()
    if error is not None:
        warnings.warn(f"vdev devices are unavailable: {error}", RuntimeWarning, stacklevel=2)
        return 0
    return _C._get_device_count()


class device:
    """Context manager that changes the current vdev device of the calling thread.

    ``device(None)`` and ``device(-1)`` do nothing, as with ``torch.cuda.device``. The previous
    device is restored on exit, also when the body raises.
    """

    def __init__(self, device: Any) -> None:
        self.idx = -1 if device is None else _get_device_index(device, optional=True, fn="device")
        self.prev_idx = -1

    def __enter__(self) -> None:
        if self.idx != -1:
            self.prev_idx = _C._exchange_device(self.idx)

    def __exit__(self, *exc_info: object) -> bool:
        if self.prev_idx != -1:
            _C._maybe_exchange_device(self.prev_idx)
            self.prev_idx = -1
        return False


class device_of(device):
    """Context manager that makes the device of ``obj`` (a tensor or storage) current, if it is on
    vdev; otherwise a no-op."""

    def __init__(self, obj: Any) -> None:
        idx = obj.get_device() if getattr(obj, "is_vdev", False) else -1
        super().__init__(idx)


@dataclass(frozen=True)
class VdevDeviceProperties:
    """Properties of one vdev device (the counterpart of ``torch.cuda``'s properties object)."""

    name: str
    total_memory: int
    major: int
    minor: int
    multi_processor_count: int

    def __repr__(self) -> str:
        return (
            f"VdevDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
            f"total_memory={self.total_memory // (1024 * 1024)}MB, "
            f"multi_processor_count={self.multi_processor_count})"
        )


def get_device_properties(device: Any = None) -> VdevDeviceProperties:
    """Returns the properties of ``device`` (default: the current device): the capability
    profile's (``VDEV_PROFILE``; ``VDEV_DEVICE_MEMORY`` sets ``total_memory`` if given)."""
    index = _get_device_index(device, optional=True, fn="get_device_properties")
    return VdevDeviceProperties(*_C._get_device_properties(index))


def get_device_name(device: Any = None) -> str:
    """Returns the name of ``device`` (default: the current device)."""
    return get_device_properties(device).name


def get_device_capability(device: Any = None) -> tuple[int, int]:
    """Returns the simulated (major, minor) compute capability of ``device``."""
    props = get_device_properties(device)
    return props.major, props.minor


def synchronize(device: Any = None) -> None:
    """Waits for all work queued on every stream of ``device`` (default: the current device), and
    raises the first error a task on one of them reported. Warnings the finished kernels raised
    are issued here (as at every synchronization point)."""
    if torch.compiler.is_compiling():  # Dynamo traces torch.accelerator.synchronize
        return torch.accelerator.synchronize(*_traced_device_args(device))
    try:
        _C._synchronize(_get_device_index(device, optional=True, fn="synchronize"))
    finally:
        _reraise_worker_warnings()


def _reraise_worker_warnings() -> None:
    """Issues the warnings of queued kernels as PyTorch issues a C++ warning (same category,
    message and "Triggered internally at" suffix)."""
    for message, deprecation, file, line, verbatim in _C._take_worker_warnings():
        if not verbatim:
            message += f" (Triggered internally at {file}:{line}.)"
        warnings.warn(message, DeprecationWarning if deprecation else UserWarning, stacklevel=3)


def set_sync_debug_mode(debug_mode: int | str) -> None:
    """Sets the debug mode for synchronizing vdev operations, as ``torch.cuda.set_sync_debug_mode``.

    ``"default"`` or 0: silent; ``"warn"`` or 1: a ``UserWarning`` at each operation that makes the
    host wait for queued work (a blocking copy between host and device, ``.item()``,
    ``Stream.synchronize()``, an operator with a data-dependent result such as ``nonzero``);
    ``"error"`` or 2: a ``RuntimeError`` there instead, before anything waits. The message names
    the operation. ``torch.vdev.synchronize()`` and ``Event.synchronize()`` are explicit and never
    warn, as on CUDA. Unlike CUDA, it also reports the waits vdev makes where CUDA would not (an
    operator vdev still runs on the host, a storage growing under ``resize_``): finding those is
    what it is for.
    """
    if isinstance(debug_mode, str):
        modes = {"default": 0, "warn": 1, "error": 2}
        if debug_mode not in modes:
            raise RuntimeError(
                f"invalid value of debug_mode {debug_mode!r}, "
                "expected one of `default`, `warn`, `error`"
            )
        debug_mode = modes[debug_mode]
    elif isinstance(debug_mode, bool) or not isinstance(debug_mode, int):
        raise RuntimeError(
            f"invalid argument to set_sync_debug_mode: {debug_mode!r}, expected one of "
            "`default`, `warn`, `error`, 0, 1, 2"
        )
    _C._set_sync_debug_mode(debug_mode)


def get_sync_debug_mode() -> int:
    """The current debug mode for synchronizing vdev operations (0, 1 or 2)."""
    return _C._get_sync_debug_mode()


def _is_in_bad_fork() -> bool:
    """True in a child process forked after vdev was used (it must not use vdev)."""
    return _C._in_bad_fork()
