"""Device memory management for ``torch.vdev``, with ``torch.cuda``'s names and semantics.

The allocator behind it is a caching allocator in the spirit of CUDA's (``cpp/backend/
device_cache.h``): statistics carry the same keys as ``torch.cuda.memory_stats``, freed blocks
stay reserved until ``empty_cache``, and allocations beyond a device's capacity
(``VDEV_DEVICE_MEMORY``) or the per-process fraction raise ``torch.OutOfMemoryError`` after the
cache was released and the allocation retried.

Memory history and snapshots follow ``torch.cuda.memory``: ``_record_memory_history`` records the
allocator's actions with their stacks, ``_snapshot`` / ``_dump_snapshot`` / ``memory_snapshot``
return or save the allocator's state in CUDA's snapshot schema, which ``python -m
torch.cuda._memory_viz`` and the viewer at https://pytorch.org/memory_viz read unchanged
(``cpp/backend/memory/memory_history.h``).
"""

from __future__ import annotations

import inspect
import operator
import pickle
import sys
import warnings
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch
from torch._utils import _augment_memory_snapshot_stack_traces

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
    "memory_snapshot",
    "inject_oom",
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


class inject_oom:
    """Makes the device allocation after the next ``after`` ones raise ``torch.OutOfMemoryError``,
    once, while the scope is open, so that a program's "catch out of memory, free, retry smaller"
    path runs (``VDEV_OOM_AFTER=N`` does the same for a whole process)::

        with torch.vdev.memory.inject_oom(after=2) as oom:
            a = torch.empty(8, device="vdev")      # allocation 1
            b = torch.empty(8, device="vdev")      # allocation 2
            c = torch.empty(8, device="vdev")      # raises torch.OutOfMemoryError
        assert oom.fired

    The error is the allocator's own, with CUDA's message: ``memory_stats()["num_ooms"]`` counts it,
    memory history records it, out-of-memory observers are called. Nothing else changes: the cache
    is not released and what was allocated stays allocated. Every allocation request the caching
    allocator serves counts, cached blocks included, on every device and thread (zero-byte tensors
    allocate nothing and do not count). Entering replaces the injection in force (an enclosing
    scope's, or ``VDEV_OOM_AFTER``'s), which is suspended meanwhile and resumes at exit with the
    count it had; an injection that has not fired by the exit is withdrawn. ``fired`` says, after
    the exit, whether this scope's error was raised."""

    def __init__(self, after: int) -> None:
        if isinstance(after, bool) or not isinstance(after, int):
            raise TypeError(f"inject_oom: after must be an int, got {type(after).__name__}")
        if not 0 <= after <= 2**63 - 1:  # VDEV_OOM_AFTER's range (an int64_t below)
            raise ValueError(
                f"inject_oom: after={after} is not valid: expected the number of device "
                f"allocations that succeed before the injected out-of-memory error, an integer "
                f"in 0..{2**63 - 1}"
            )
        self.after = after
        self.fired = False
        self._replaced: int | None = None

    def __enter__(self) -> inject_oom:
        if self._replaced is not None:
            raise RuntimeError("inject_oom: this scope is already open")
        self.fired = False
        self._replaced = _C._exchange_injected_oom(self.after)
        return self

    def __exit__(self, *exc: object) -> None:
        # -1: this scope's countdown reached its allocation (nested scopes put back what they
        # found, so nothing else disarms it).
        left = _C._exchange_injected_oom(self._replaced)
        self._replaced = None
        self.fired = left < 0


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


# c10's RecordContext: which stacks memory history keeps (context=...).
_CONTEXTS = {None: 0, "state": 1, "alloc": 2, "all": 3}
# c10's TraceEntry actions, by CUDA's names (skip_actions=...): the bindings' one list.
_TRACE_ACTIONS = tuple(_C._trace_actions())


def _check_choice(name: str, value: Any, valid: tuple) -> None:
    if not any(value is v or (isinstance(value, str) and value == v) for v in valid):
        choices = ", ".join(repr(v) for v in valid)
        raise ValueError(f"_record_memory_history: {name}={value!r} is not one of {choices}")


# What torch.cuda's bindings take for max_entries: a size_t (the current form) or an int64_t (the
# older boolean form), each converted by pybind11, which raises TypeError for anything else.
_SIZE_T_MAX = 2**64 - 1
_INT64 = (-(2**63), 2**63 - 1)


def _check_max_entries(value: Any, name: str = "max_entries", legacy: bool = False) -> int:
    """The ring buffer's size for ``max_entries``, as CUDA sizes it: its allocator keeps at least
    one entry (c10's ``RingBuffer::setMaxEntries`` is ``std::max(1, size)``), so 0 records the
    newest action; a value the binding cannot convert raises ``TypeError`` there, and here with
    the value and the valid range. The older form's ``int64_t`` becomes that ``size_t`` by C++'s
    conversion, so a negative value there means a ring larger than any history: every entry is
    kept. Sizes past ``sys.maxsize`` keep every entry too (no history is that long)."""
    low, high = _INT64 if legacy else (0, _SIZE_T_MAX)
    # pybind11 converts an int (bool is one) and anything with __index__, never a float.
    if isinstance(value, float) or not hasattr(type(value), "__index__"):
        raise TypeError(
            f"_record_memory_history: {name}={value!r} must be an integer in {low}..{high} "
            f"(the newest actions kept per device; 0 keeps one, as on CUDA)"
        )
    entries = operator.index(value)
    if not low <= entries <= high:
        raise TypeError(
            f"_record_memory_history: {name}={value!r} is out of range: expected an integer in "
            f"{low}..{high} (the newest actions kept per device; 0 keeps one, as on CUDA)"
        )
    if entries < 0:  # the older form: int64_t -> size_t wraps to a huge ring
        return sys.maxsize
    return min(max(entries, 1), sys.maxsize)


def _check_skip_actions(skip_actions: Any) -> list[str]:
    if skip_actions is None:
        return []
    if isinstance(skip_actions, str):
        raise ValueError(
            f"_record_memory_history: skip_actions={skip_actions!r} must be a list of actions, "
            f"not a string"
        )
    actions = list(skip_actions)
    for action in actions:
        if action not in _TRACE_ACTIONS:
            raise ValueError(
                f"_record_memory_history: skip_actions contains {action!r}, which is not one of "
                + ", ".join(repr(a) for a in _TRACE_ACTIONS)
            )
    return actions


def _check_device(device: Any) -> None:
    index = _index(device, "_record_memory_history")
    count = _C._get_device_count()
    if not 0 <= index < count:
        raise IndexError(
            f"[_record_memory_history] device index {index} out of range: {count} vdev devices "
            f"(0..{count - 1})"
        )


def _record_memory_history_impl(
    enabled: str | None = "all",
    context: str | None = "all",
    stacks: str = "all",
    max_entries: int = sys.maxsize,
    device: Any = None,
    clear_history: bool = False,
    compile_context: bool = False,
    global_record_annotations: bool = False,
    skip_actions: list[str] | None = None,
    record_pinned_host_memory: bool = False,
    record_cuda: bool = True,
) -> None:
    _check_choice("enabled", enabled, (None, "state", "all"))
    if record_pinned_host_memory:
        # torch 2.14's pinned host history (HostAllocator::record_history): a warning, not an
        # error, so that a program written for CUDA still runs; its snapshot lacks host segments.
        warnings.warn(
            "vdev does not record the history of pinned host memory "
            "(record_pinned_host_memory=True): the device history is recorded as usual",
            stacklevel=3,
        )
    _check_choice("context", context, tuple(_CONTEXTS))
    _check_choice("stacks", stacks, ("python", "all"))
    max_entries = _check_max_entries(max_entries)
    actions = _check_skip_actions(skip_actions)
    if device is not None:
        _check_device(device)  # history covers every device, as CUDA's
    if not record_cuda:  # CUDA's: the device allocator's recording is left as it is
        return
    on = enabled is not None
    _C._record_memory_history(
        on,
        _CONTEXTS[context] if on else 0,
        on and context is not None and stacks == "all",
        max_entries if enabled == "all" else 1,  # "state": no history beyond the newest entry
        bool(clear_history),
        bool(compile_context),
        bool(global_record_annotations),
        actions,
    )


def _record_memory_history_legacy(
    enabled: bool,
    record_context: bool = True,
    trace_alloc_max_entries: int = 1,
    trace_alloc_record_context: bool = False,
    device: Any = None,
    record_context_cpp: bool = False,
    clear_history: bool = False,
    compile_context: bool = False,
    global_record_annotations: bool = False,
    skip_actions: list[str] | None = None,
) -> None:
    """torch.cuda's older boolean form: ``enabled=True`` records; ``record_context`` keeps stacks
    with live blocks, ``trace_alloc_record_context`` also with alloc entries."""
    max_entries = _check_max_entries(trace_alloc_max_entries, "trace_alloc_max_entries", True)
    actions = _check_skip_actions(skip_actions)
    if device is not None:
        _check_device(device)
    when = 2 if trace_alloc_record_context else (1 if record_context else 0)
    _C._record_memory_history(
        bool(enabled),
        when if enabled else 0,
        bool(enabled and record_context_cpp and when != 0),
        max_entries,
        bool(clear_history),
        bool(compile_context),
        bool(global_record_annotations),
        actions,
    )


def _record_memory_history(enabled: str | None = "all", *args: Any, **kwargs: Any) -> None:
    """Records the allocator's actions on every vdev device, with the stacks that caused them, as
    ``torch.cuda.memory._record_memory_history`` does; :func:`_snapshot` returns them.

    Args:
        enabled: ``None`` stops recording (and drops the recorded actions); ``"state"`` keeps
            stacks for live blocks only; ``"all"`` also keeps a history of every action (alloc,
            free_requested, free_completed, segment_alloc, segment_free, oom, snapshot).
        context: which stacks are kept: ``None`` none, ``"state"`` for live blocks, ``"alloc"``
            also with each alloc, ``"all"`` also with each free.
        stacks: ``"python"`` for Python (and TorchScript, Inductor) frames, ``"all"`` for C++
            frames too.
        max_entries: the newest actions kept per device, an integer in 0..2**64-1; 0 keeps one
            (CUDA's allocator keeps at least one), anything else raises ``TypeError`` as CUDA's
            binding does.
        device: checked, as on CUDA the setting applies to every device.
        clear_history: drop what was recorded before.
        compile_context: record the innermost ``torch.compile`` region with each action.
        global_record_annotations: record ``torch.profiler.record_function`` annotations of
            every thread (by default those of the calling thread).
        skip_actions: action names not to record.
        record_pinned_host_memory: (torch 2.14's) not recorded by vdev: warns.
        record_cuda: ``False`` leaves the device allocator's recording as it is (torch 2.14's
            name, kept for programs written for CUDA).

    ``enabled=True``/``False`` takes torch.cuda's older arguments (``record_context``,
    ``trace_alloc_max_entries``, ``trace_alloc_record_context``, ``record_context_cpp``, ...).
    An unknown value raises ``ValueError`` naming it and the valid ones (``TypeError`` for a
    ``max_entries`` that is not an integer in range, as on CUDA).
    """
    if isinstance(enabled, bool):
        return _record_memory_history_legacy(enabled, *args, **kwargs)
    return _record_memory_history_impl(enabled, *args, **kwargs)


_record_memory_history.__signature__ = inspect.signature(_record_memory_history_impl)  # type: ignore[attr-defined]


def _snapshot(device: Any = None, augment_with_fx_traces: bool = False) -> dict[str, Any]:
    """The allocator's state and recorded history of every vdev device, as the dictionary
    ``torch.cuda.memory._snapshot`` returns: ``segments`` (each with its ``blocks``),
    ``device_traces`` (a list of actions per device), ``allocator_settings`` and
    ``external_annotations``. The segments' sizes add up to ``memory_reserved``, the
    ``active_allocated`` blocks' to ``memory_allocated`` (``device`` is ignored, as on CUDA)."""
    s = _C._memory_snapshot(True)
    if augment_with_fx_traces:
        s = _augment_memory_snapshot_stack_traces(s)
    return s


def _dump_snapshot(
    filename: str = "dump_snapshot.pickle", augment_with_fx_traces: bool = False
) -> None:
    """Saves :func:`_snapshot` as a pickle, which https://pytorch.org/memory_viz and
    ``python -m torch.cuda._memory_viz`` open."""
    s = _snapshot(augment_with_fx_traces=augment_with_fx_traces)
    with open(filename, "wb") as f:
        pickle.dump(s, f)


def memory_snapshot(mempool_id: tuple[int, int] | None = None, include_traces: bool = True):
    """The segments of every vdev device (``_snapshot()["segments"]``), or only those of the
    graph memory pool ``mempool_id``, as ``torch.cuda.memory_snapshot``."""
    segments = _C._memory_snapshot(bool(include_traces))["segments"]
    if mempool_id is None:
        return segments
    pool = tuple(mempool_id)
    return [s for s in segments if s["segment_pool_id"] == pool]


def _attach_out_of_memory_observer(
    observer: Callable[[int, int, int, int], None],
) -> None:
    """Calls ``observer(device, alloc, device_allocated, device_free)`` whenever an allocation is
    about to raise ``torch.OutOfMemoryError``, before it is raised (torch.cuda's
    ``torch._C._cuda_attach_out_of_memory_observer``): ``alloc`` is the size requested,
    ``device_allocated`` what the process may use on the device, ``device_free`` what the device
    has free. A snapshot taken there shows the allocator at the failure; an error raised by the
    observer is reported as unraisable, the allocation raises the out-of-memory error."""
    if not callable(observer):
        raise TypeError(
            f"_attach_out_of_memory_observer: expected a callable, got {type(observer).__name__}"
        )
    _C._attach_out_of_memory_observer(observer)


def _set_memory_metadata(metadata: str) -> None:
    """A string recorded with every following action of the current device (an empty string
    clears it), as ``torch.cuda.memory._set_memory_metadata``."""
    if not isinstance(metadata, str):
        raise TypeError(f"_set_memory_metadata: expected a str, got {type(metadata).__name__}")
    _C._set_memory_metadata(metadata)


def _get_memory_metadata() -> str:
    """The string set by :func:`_set_memory_metadata` for the current device."""
    return _C._get_memory_metadata()
