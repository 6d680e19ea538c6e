"""Device memory management for ``torch.vdev``, with ``torch.cuda``'s names and semantics.

The allocator behind it is a caching allocator in the spirit of CUDA's (``cpp/backend/
device_cache.h``): statistics carry the same keys as ``torch.cuda.memory_stats``, freed blocks
stay reserved until ``empty_cache``, and allocations beyond a device's capacity
(``VDEV_DEVICE_MEMORY``) or the per-process fraction raise ``torch.OutOfMemoryError`` after the
cache was released and the allocation retried.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Any

import torch

from torch_vdev import _C
from torch_vdev.vdev._utils import _get_device_index

__all__ = [
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
    "memory_stats",
    "memory_summary",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
    "set_per_process_memory_fraction",
]


def _index(device: Any, fn: str) -> int:
    return _get_device_index(device, optional=True, fn=fn)


def memory_stats(device: Any = None) -> OrderedDict[str, Any]:
    """Allocator statistics of ``device``, keyed as ``torch.cuda.memory_stats``: for each of
    allocation, segment, active, inactive_split, allocated_bytes, reserved_bytes, active_bytes,
    inactive_split_bytes and requested_bytes, the ``current``, ``peak``, ``allocated`` and
    ``freed`` values over ``all``, ``small_pool`` and ``large_pool``; plus num_alloc_retries,
    num_ooms, num_sync_all_streams, num_device_alloc and num_device_free."""
    return torch.accelerator.memory_stats(_index(device, "memory_stats"))


def memory_stats_as_nested_dict(device: Any = None) -> dict[str, Any]:
    """``memory_stats`` as nested dictionaries (``"allocated_bytes.all.peak"`` becomes
    ``["allocated_bytes"]["all"]["peak"]``), as ``torch.cuda.memory_stats_as_nested_dict``."""
    nested: dict[str, Any] = {}
    for key, value in memory_stats(device).items():
        *path, leaf = key.split(".")
        node = nested
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def memory_allocated(device: Any = None) -> int:
    """Bytes currently occupied by tensors on ``device``."""
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device: Any = None) -> int:
    """Peak of ``memory_allocated`` since start or the last ``reset_peak_memory_stats``."""
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device: Any = None) -> int:
    """Bytes held by the caching allocator on ``device`` (allocated plus cached)."""
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device: Any = None) -> int:
    """Peak of ``memory_reserved`` since start or the last ``reset_peak_memory_stats``."""
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device: Any = None) -> None:
    """Sets every ``peak`` statistic of ``device`` to its current value."""
    torch.accelerator.reset_peak_memory_stats(_index(device, "reset_peak_memory_stats"))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    """Resets the ``allocated`` and ``freed`` counters and the event counts of ``device``."""
    torch.accelerator.reset_accumulated_memory_stats(
        _index(device, "reset_accumulated_memory_stats")
    )


def empty_cache() -> None:
    """Returns every unused cached block of every device to the system (waiting first for queued
    work that may still use them); the process's resident memory drops accordingly."""
    _C._empty_cache()  # releases the GIL while it waits (torch.accelerator.empty_cache does not)


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of ``device``: its capacity minus what this process reserved."""
    return torch.accelerator.get_memory_info(_index(device, "mem_get_info"))


def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    """Limits the memory this process may reserve on ``device`` to ``fraction`` of its capacity.
    Allocating beyond it raises ``torch.OutOfMemoryError``, as on CUDA."""
    if not isinstance(fraction, float):
        raise TypeError(
            f"Invalid type for fraction argument, must be `float`, got {type(fraction).__name__}"
        )
    _C._set_memory_fraction(fraction, _index(device, "set_per_process_memory_fraction"))


def get_per_process_memory_fraction(device: Any = None) -> float:
    """The fraction set by ``set_per_process_memory_fraction`` (1.0 by default)."""
    return _C._get_memory_fraction(_index(device, "get_per_process_memory_fraction"))


def host_memory_stats() -> dict[str, int]:
    """Statistics of the pinned host allocator, keyed as ``torch.cuda.host_memory_stats``:
    ``allocations`` / ``allocated_bytes`` count blocks obtained from the system (cached ones
    included), ``active_requests`` / ``active_bytes`` the blocks in use; each with ``current``,
    ``peak``, ``allocated`` and ``freed``; plus ``num_host_alloc`` and ``num_host_free``."""
    return dict(sorted(_C._host_memory_stats().items()))


def reset_peak_host_memory_stats() -> None:
    """Sets every ``peak`` statistic of the pinned host allocator to its current value."""
    _C._reset_peak_host_memory_stats()


def reset_accumulated_host_memory_stats() -> None:
    """Resets the ``allocated`` and ``freed`` counters of the pinned host allocator."""
    _C._reset_accumulated_host_memory_stats()


def empty_host_cache() -> None:
    """Returns every cached (unused) pinned host block to the system."""
    torch.accelerator.empty_host_cache()


def _format_bytes(n: int) -> str:
    for unit in ("B  ", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:7d} {unit}" if unit == "B  " else f"{n:7.2f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A printable table of the allocator statistics of ``device`` (current, peak, total
    allocated and total freed), per pool unless ``abbreviated``."""
    index = _index(device, "memory_summary")
    stats = memory_stats(index)
    pools = ("all",) if abbreviated else ("all", "large_pool", "small_pool")
    rows = [
        ("Allocated memory", "allocated_bytes", True),
        ("Active memory", "active_bytes", True),
        ("Requested memory", "requested_bytes", True),
        ("Reserved memory", "reserved_bytes", True),
        ("Non-releasable memory", "inactive_split_bytes", True),
        ("Allocations", "allocation", False),
        ("Active allocs", "active", False),
        ("Device reserved segments", "segment", False),
        ("Non-releasable allocs", "inactive_split", False),
    ]
    width = 91
    line = "|" + "-" * (width - 2) + "|"
    out = [
        "|" + "=" * (width - 2) + "|",
        f"| {'vdev memory summary, device ' + str(index):<{width - 4}} |",
        line,
        f"| {'Metric':<28}| {'Cur Usage':>12} | {'Peak Usage':>12} | {'Tot Alloc':>12} "
        f"| {'Tot Freed':>12} |",
    ]
    for title, key, is_bytes in rows:
        out.append(line)
        for pool in pools:
            label = title if pool == "all" else f"      from {pool.replace('_', ' ')}"
            values = [
                stats.get(f"{key}.{pool}.{f}", 0) for f in ("current", "peak", "allocated", "freed")
            ]
            cells = [_format_bytes(v) if is_bytes else f"{v:>11d}" for v in values]
            out.append(f"| {label:<28}| " + " | ".join(f"{c:>12}" for c in cells) + " |")
    out.append(line)
    for key in ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc"):
        out.append(f"| {key:<28}| {stats.get(key, 0):>12d}{'':<{width - 46}}|")
    out.append("|" + "=" * (width - 2) + "|")
    return "\n".join(out) + "\n"


def _renamed(old: str, new: str) -> None:
    warnings.warn(
        f"`torch.vdev.{old}` has been renamed to `torch.vdev.{new}`", FutureWarning, stacklevel=3
    )


# torch.cuda's deprecated names, still common in logging code: the same warning and behaviour.
def memory_cached(device: Any = None) -> int:
    """Deprecated; see :func:`memory_reserved`."""
    _renamed("memory_cached", "memory_reserved")
    return memory_reserved(device)


def max_memory_cached(device: Any = None) -> int:
    """Deprecated; see :func:`max_memory_reserved`."""
    _renamed("max_memory_cached", "max_memory_reserved")
    return max_memory_reserved(device)


def reset_max_memory_allocated(device: Any = None) -> None:
    """Deprecated: resets every peak statistic (:func:`reset_peak_memory_stats`), as on CUDA."""
    _renamed("reset_max_memory_allocated", "reset_peak_memory_stats")
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device: Any = None) -> None:
    """Deprecated: resets every peak statistic (:func:`reset_peak_memory_stats`), as on CUDA."""
    _renamed("reset_max_memory_cached", "reset_peak_memory_stats")
    reset_peak_memory_stats(device)
