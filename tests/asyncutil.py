"""Deterministic helpers for asynchronous tests: gates hold a stream's worker until opened."""

import contextlib
import re
import threading
import time

import pytest
import torch

from torch_vdev import _testing as rt


def sid(stream: torch.Stream) -> tuple[int, int]:
    return stream.device_index, stream.stream_id


@contextlib.contextmanager
def gated(stream: torch.Stream):
    """Blocks `stream` until the block exits; yields the gate. Opens it even if the body fails,
    so a failing test never leaves a worker blocked."""
    gate = rt.Gate()
    rt.enqueue_gate(*sid(stream), gate)
    try:
        yield gate
    finally:
        gate.open()


def log_on(stream: torch.Stream, log, value: int) -> None:
    rt.enqueue_log(*sid(stream), log, value)


def wait_until_blocked(gate, waiters: int = 1) -> None:
    """Waits until `waiters` tasks are blocked on `gate` (the worker has reached it). Bounded so a
    broken runtime fails the test instead of hanging it; the bound is not a timing assertion."""
    deadline = time.monotonic() + 60
    while gate.waiting() < waiters:
        assert time.monotonic() < deadline, "no stream worker reached the gate"
        time.sleep(0.0005)


def wait_until_idle(stream: torch.Stream) -> None:
    """Waits until every task queued on `stream` has run, without synchronizing (which would
    raise a pending error). Bounded like wait_until_blocked."""
    deadline = time.monotonic() + 60
    while not rt.stream_query(*sid(stream)):
        assert time.monotonic() < deadline, "the stream's queued work never completed"
        time.sleep(0.0005)


def run_bounded(fn, timeout: float = 60.0) -> bool:
    """Runs fn on a thread; returns whether it finished. A call that synchronizes behind a closed
    gate would never finish: the bound turns that hang into a failure (not a timing assertion)."""
    done = threading.Event()
    errors = []

    def body():
        try:
            fn()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
        done.set()

    threading.Thread(target=body, daemon=True).start()
    finished = done.wait(timeout)
    if errors:
        raise errors[0]
    return finished


def on_stream(stream: torch.Stream, fn):
    """fn, to be called on `stream` from any thread (the current stream is per thread)."""

    def call():
        with torch.vdev.stream(stream):
            return fn()

    return call


def assert_refused_before_waiting(call, operation: str = "") -> None:
    """Asserts that `call` makes the host wait and decides so at the call, before it runs or waits
    for anything: in "error" sync-debug mode it is refused, naming `operation`. Meant for calls made
    while work is held behind a closed gate: a call that is queued instead returns (this fails); one
    that waits first would stay behind the gate (run_bounded turns that into a failure)."""
    previous = torch.vdev.get_sync_debug_mode()
    torch.vdev.set_sync_debug_mode("error")
    try:
        pattern = "called a synchronizing vdev operation: " + re.escape(operation)
        with pytest.raises(RuntimeError, match=pattern):
            run_bounded(call)
    finally:
        torch.vdev.set_sync_debug_mode(previous)


def assert_raises_failure_queued_on(stream: torch.Stream, call) -> None:
    """Asserts that `call` synchronizes `stream`: a task that failed there before the call, its
    error not yet reported, makes the call raise that error. A call that waits for no stream, or
    for another one, returns instead. (Queuing work on `stream` raises it too: pair this with
    assert_refused_before_waiting.)"""
    message = f"failed on vdev:{stream.device_index} stream {stream.stream_id} before the call"
    rt.enqueue_failure(*sid(stream), message)
    wait_until_idle(stream)  # it has failed; nothing has reported it yet
    try:
        with pytest.raises(RuntimeError, match=re.escape(message)):
            call()
    finally:
        try:
            stream.synchronize()  # where the call did not raise it, no later test meets it
        except RuntimeError as e:
            if message not in str(e):
                raise


def sync_warnings(fn) -> list[str]:
    """The operations fn's synchronizing calls name, in order, in the sync debug mode's "warn"
    mode (then back to the default mode)."""
    import warnings

    torch.vdev.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn()
    finally:
        torch.vdev.set_sync_debug_mode("default")
    prefix = "called a synchronizing vdev operation: "
    return [
        str(w.message)[len(prefix) :].split(" (Triggered internally")[0]
        for w in caught
        if str(w.message).startswith(prefix)
    ]


def run_in_threads(work, count: int) -> list[Exception]:
    """Runs work(k) for k in range(count), each on its own thread, and returns what they raised
    (an assertion failing in a thread is otherwise lost: the test would pass)."""
    errors: list[Exception] = []

    def run(k: int) -> None:
        try:
            work(k)
        except Exception as e:  # noqa: BLE001 - returned to the test
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def failing_operator(namespace: str) -> torch.library.Library:
    """Defines ``torch.ops.<namespace>.boom(x)``: queued (it has a Meta kernel, so the executor
    plans it), its CPU kernel raises ValueError("boom") on the worker, a failure CUDA would have
    raised on the host (no device-side assert). Returns the library; destroying it removes the
    operator."""
    lib = torch.library.Library(namespace, "DEF")
    lib.define("boom(Tensor x) -> Tensor")
    lib.impl("boom", lambda x: torch.empty_like(x), "Meta")

    def boom(x):
        raise ValueError("boom")

    lib.impl("boom", boom, "CPU")
    return lib
