"""Streams and events of ``torch.vdev``, following ``torch.cuda``'s names and semantics.

A stream is a queue of work run in order by its own worker thread; operators and copies return
once their work is queued. The current stream is per thread and per device, and starts as the
device's default stream. ``torch.Stream``/``torch.Event`` with ``device="vdev:N"`` work as well;
the classes here add ``priority`` and the ``torch.cuda``-style constructors.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from torch_vdev import _C
from torch_vdev.vdev._utils import _get_device_index, _traced_device_args


def _index(device: Any) -> int:
    return _get_device_index(device, optional=True, fn="stream")


class Stream(torch.Stream):
    """A vdev stream. ``Stream(device=None, priority=0)`` takes a stream of that priority from
    ``device``'s pool (default: the current device), round-robin over 32 streams per priority,
    exactly as ``torch.cuda.Stream`` does. Priorities range over ``Stream.priority_range()``
    (``(0, -1)``: a lower value is a higher priority; values outside are clamped)."""

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs: Any) -> Stream:
        if "stream_id" in kwargs:  # wrap an existing stream (as torch.cuda.Stream does)
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=torch.device("vdev", _index(device)), priority=priority)

    @property
    def priority(self) -> int:
        return _C._stream_priority(self.device_index, self.stream_id)

    @staticmethod
    def priority_range() -> tuple[int, int]:
        return _C._stream_priority_range()

    def record_event(self, event: torch.Event | None = None) -> torch.Event:
        """Records ``event`` (a new ``torch.vdev.Event`` if None) on this stream; returns it.
        (torch.Stream.record_event accepts only exact torch.Event objects.)"""
        if event is None:
            event = Event()
        event.record(self)
        return event

    def wait_event(self, event: torch.Event) -> None:
        """Makes all work queued on this stream from now on wait for ``event``. As
        torch.cuda.Stream's, it calls ``event.wait(self)``: anything but an event raises
        (torch.Stream's C++ method casts its argument to an event unchecked)."""
        event.wait(self)

    def wait_stream(self, stream: torch.Stream) -> None:
        """Makes all work queued on this stream from now on wait for the work queued on
        ``stream`` so far (as torch.cuda.Stream's: through an event recorded there)."""
        self.wait_event(stream.record_event())

    def __repr__(self) -> str:
        return f"<torch.vdev.Stream device=vdev:{self.device_index} stream_id={self.stream_id}>"


class Event(torch.Event):
    """A vdev event: ``Event(enable_timing=False, blocking=False, interprocess=False)``. It belongs
    to the device of the first stream it is recorded on."""

    def __new__(
        cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> Event:
        if interprocess:
            raise NotImplementedError("vdev events cannot be shared between processes")
        return super().__new__(
            cls,
            device=torch.device("vdev", _C._get_device()),
            enable_timing=enable_timing,
            blocking=blocking,
        )

    def elapsed_time(self, end_event: torch.Event) -> float:
        """Milliseconds from this event to ``end_event`` (a torch.Event or torch.vdev.Event); both
        recorded, completed and created with ``enable_timing=True``."""
        if not self.query() or not end_event.query():
            raise RuntimeError("Both events must be completed before calculating elapsed time.")
        return _C._event_elapsed_time(self.event_id, end_event.event_id)


def _wrap(stream: torch.Stream) -> Stream:
    return Stream(
        stream_id=stream.stream_id,
        device_index=stream.device_index,
        device_type=stream.device_type,
    )


def current_stream(device: Any = None) -> Stream:
    """The calling thread's current stream on ``device`` (default: the current device)."""
    if torch.compiler.is_compiling():  # Dynamo traces torch.accelerator's streams
        return torch.accelerator.current_stream(*_traced_device_args(device))
    return _wrap(torch.accelerator.current_stream(_index(device)))


def default_stream(device: Any = None) -> Stream:
    """The default stream of ``device`` (default: the current device)."""
    current = torch.accelerator.current_stream(_index(device))
    return Stream(stream_id=0, device_index=current.device_index, device_type=current.device_type)


def set_stream(stream: torch.Stream) -> None:
    """Makes ``stream`` the current stream of its device and its device the current device
    (``torch.cuda.set_stream`` semantics). ``None`` does nothing."""
    if stream is None:
        return
    torch.accelerator.set_stream(stream)


class StreamContext:
    """Context manager that makes ``stream`` current (and its device current), restoring the
    previous stream of that device and the previous device on exit. ``None`` does nothing."""

    def __init__(self, stream: torch.Stream | None) -> None:
        self.stream = stream
        self.prev_device = -1
        self.prev_stream: torch.Stream | None = None

    def __enter__(self) -> torch.Stream | None:
        if self.stream is None:
            return None
        self.prev_device = _C._get_device()
        self.prev_stream = torch.accelerator.current_stream(self.stream.device_index)
        torch.accelerator.set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc_info: object) -> bool:
        if self.stream is not None:
            torch.accelerator.set_stream(self.prev_stream)
            _C._set_device(self.prev_device)
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    """``with torch.vdev.stream(s):`` runs the block with ``s`` as the current stream."""
    if torch.compiler.is_compiling():  # Dynamo traces a stream used as a context manager
        return contextlib.nullcontext() if stream is None else stream
    return StreamContext(stream)
