"""torch.vdev.sanitizer: vdev's bug finders, which CUDA has no equivalent of on the host.

``streams``
    The stream sanitizer. vdev sees every task it queues, on the host, in order: it keeps a
    happens-before relation between the host and every stream (stream order, events,
    ``wait_stream``, synchronizes, blocking copies, ``record_stream``, graph replays, collectives)
    and the bytes each task reads and writes. An access that conflicts with an earlier one of
    another stream (at least one writes, the bytes overlap, nothing orders them) raises
    :class:`StreamRaceError` at the call that queued it, with both Python stacks.
``init``
    Reads of device memory that no operation wrote since it was allocated raise
    :class:`UninitializedReadError`, with the stack that allocated it.
``poison``
    Fresh and freed device blocks are filled with 0xFF bytes (NaN in floating dtypes), so stale
    reads show in values.
``warn``
    Findings are warnings instead of errors; the program goes on.

Switch them on from the start with ``VDEV_SANITIZER=streams,init`` (read when torch loads vdev), or
at run time with :func:`enable` / the :func:`sanitize` context manager; ``python -m
torch_vdev.sanitize script.py`` runs a whole script under them and prints a summary.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from torch_vdev import _C

__all__ = [
    "StreamRaceError",
    "UninitializedReadError",
    "Finding",
    "enable",
    "disable",
    "enabled",
    "sanitize",
    "findings",
    "finding_count",
    "clear_findings",
]

_TOOLS = {"streams": 1, "init": 2, "poison": 4, "warn": 8}


class StreamRaceError(RuntimeError):
    """Two streams access the same device bytes, at least one writing, and nothing orders them."""


class UninitializedReadError(RuntimeError):
    """A read of device bytes that no operation has written since they were allocated."""


_C._sanitizer_set_error_types(StreamRaceError, UninitializedReadError)


def _release_stacks(phase: str, info: dict) -> None:
    # The stacks kept for reports hold code objects, and torch.compile keeps its caches on them:
    # a collection asks for them to be turned into text at the next stack the sanitizer gathers
    # (recorded_stack.h). Nothing runs here: a collection may start in the middle of an import.
    if phase == "start":
        _C._sanitizer_release_stacks_soon()


gc.callbacks.append(_release_stacks)


@dataclass(frozen=True)
class Finding:
    """One report: ``kind`` is ``"data race"`` or ``"uninitialized read"``."""

    kind: str
    message: str


def _flags(tools: str | Iterable[str]) -> int:
    text = tools if isinstance(tools, str) else ",".join(tools)
    try:
        return _C._sanitizer_parse(text)
    except ValueError as e:
        raise ValueError(str(e).replace("tools='", "sanitizer tools '")) from None


def _names(flags: int) -> set[str]:
    return {name for name, bit in _TOOLS.items() if flags & bit}


def enable(tools: str | Iterable[str] = "streams", *, warn: bool | None = None) -> None:
    """Switches ``tools`` on (``"streams"``, ``"init"``, ``"poison"``; a comma-separated string or
    an iterable), keeping those already on. ``warn=True`` reports findings as warnings;
    ``warn=False`` raises them; ``None`` keeps the current choice."""
    flags = _C._sanitizer_flags() | _flags(tools)
    if warn is not None:
        flags = (flags | _TOOLS["warn"]) if warn else (flags & ~_TOOLS["warn"])
    _C._sanitizer_set_flags(flags)


def disable(tools: str | Iterable[str] | None = None) -> None:
    """Switches ``tools`` off (all of them by default). What a tool recorded is forgotten."""
    flags = 0 if tools is None else _C._sanitizer_flags() & ~_flags(tools)
    if flags & ~_TOOLS["warn"] == 0:
        flags = 0
    _C._sanitizer_set_flags(flags)


def enabled() -> set[str]:
    """The tools on now (``"warn"`` included when findings are warnings)."""
    return _names(_C._sanitizer_flags())


@contextlib.contextmanager
def sanitize(tools: str | Iterable[str] = "streams", *, warn: bool = False) -> Iterator[None]:
    """Runs the body with exactly ``tools`` on, then restores what was on before."""
    before = _C._sanitizer_flags()
    flags = _flags(tools) | (_TOOLS["warn"] if warn else 0)
    _C._sanitizer_set_flags(flags)
    try:
        yield
    finally:
        _C._sanitizer_set_flags(before)


_KINDS = {0: "data race", 1: "uninitialized read"}


def findings() -> list[Finding]:
    """The findings reported so far in this process (the first 256), raised or warned."""
    return [Finding(_KINDS[k], m) for k, m in _C._sanitizer_findings()]


def finding_count() -> int:
    """How many findings were reported in all (also beyond the 256 kept)."""
    return _C._sanitizer_finding_count()


def clear_findings() -> None:
    """Forgets the findings reported so far."""
    _C._sanitizer_clear_findings()
