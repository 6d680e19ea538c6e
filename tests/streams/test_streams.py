"""Streams and events: real asynchrony, checked with gates (never with timing)."""

import gc
import threading

import pytest
import torch
from asyncutil import (
    assert_raises_failure_queued_on,
    assert_refused_before_waiting,
    gated,
    log_on,
    on_stream,
    sid,
    wait_until_blocked,
    wait_until_idle,
)

from torch_vdev import _testing as rt


def test_stream_kinds_and_identity(device_count):
    d0 = torch.vdev.default_stream()
    assert d0.stream_id == 0 and d0.device_index == 0
    assert torch.vdev.current_stream(1) == torch.vdev.default_stream(1)
    s = torch.Stream(device="vdev:1")
    t = torch.vdev.Stream("vdev:1", priority=-1)
    assert s.device == torch.device("vdev:1") and t.device_index == 1
    assert len({s.stream_id, t.stream_id, 0}) == 3
    assert t.priority == -1 and torch.vdev.Stream(1).priority == 0
    assert torch.vdev.Stream(priority=-9).priority == -1  # clamped, as CUDA does
    assert torch.vdev.Stream.priority_range() == (0, -1)
    assert s.query() and isinstance(torch.vdev.current_stream(), torch.vdev.Stream)
    with pytest.raises(IndexError, match="device index 2 out of range"):
        torch.Stream(device="vdev:2")


def test_query_is_false_while_work_is_pending_and_synchronize_waits():
    s = torch.vdev.Stream()
    log = rt.Log()
    with gated(s):
        log_on(s, log, 1)
        assert not s.query()
        assert log.values() == []
    s.synchronize()
    assert s.query() and log.values() == [1]


def test_events_mark_points_in_the_work():
    s = torch.vdev.Stream(1)
    start, end = torch.vdev.Event(enable_timing=True), torch.vdev.Event(True)
    plain = torch.Event(device="vdev:1", enable_timing=True)
    assert start.query()  # never recorded: complete
    start.record(s)
    with gated(s):
        end.record(s)
        plain.record(s)
        assert not end.query() and not plain.query()
        with pytest.raises(RuntimeError, match="must be completed"):
            start.elapsed_time(end)
    end.synchronize()
    plain.synchronize()
    assert end.query()
    assert start.elapsed_time(end) >= 0.0
    assert start.elapsed_time(plain) >= 0.0  # a torch.vdev.Event accepts torch.Event too
    plain2 = torch.Event(device="vdev:1", enable_timing=True)
    plain2.record(s)
    plain2.synchronize()
    assert plain.elapsed_time(plain2) >= 0.0  # and torch.Event pairs time through the guard
    untimed = torch.vdev.Event()
    untimed.record(s)
    untimed.synchronize()
    with pytest.raises(ValueError, match="enable_timing=True"):
        start.elapsed_time(untimed)
    with pytest.raises(ValueError, match="recorded"):
        start.elapsed_time(torch.vdev.Event(enable_timing=True))
    with pytest.raises(ValueError, match="enable_timing=True"):
        plain.elapsed_time(torch.Event(device="vdev:1"))


def test_event_belongs_to_the_device_it_was_first_recorded_on():
    e = torch.vdev.Event()
    e.record(torch.vdev.Stream(1))
    with pytest.raises(ValueError, match="cannot be recorded on a stream of vdev:0"):
        e.record(torch.vdev.Stream(0))


def test_rerecording_moves_the_event_but_a_wait_keeps_its_point():
    a, b, c = torch.vdev.Stream(), torch.vdev.Stream(), torch.vdev.Stream()
    e = torch.vdev.Event()
    log = rt.Log()
    with gated(a) as gate_a:
        e.record(a)
        c.wait_event(e)  # waits for the point on `a`, behind gate_a
        log_on(c, log, 3)
        e.record(b)  # re-record on an idle stream: the event itself is now complete
        e.synchronize()
        assert e.query()
        assert not c.query() and log.values() == []  # c still waits for the older point
        wait_until_blocked(gate_a)
    c.synchronize()
    assert log.values() == [3]


def test_wait_event_and_wait_stream_really_delay_the_waiting_stream():
    producer, consumer = torch.vdev.Stream(0), torch.vdev.Stream(1)
    log = rt.Log()
    with gated(producer):
        log_on(producer, log, 1)
        e = producer.record_event()
        consumer.wait_event(e)
        log_on(consumer, log, 2)
        other = torch.vdev.Stream(1)
        other.wait_stream(producer)
        log_on(other, log, 3)
        assert not consumer.query() and not other.query()
        assert log.values() == []
    torch.vdev.synchronize(1)
    assert log.values()[0] == 1 and sorted(log.values()) == [1, 2, 3]


@pytest.mark.parametrize("not_an_event", [None, 3, "e"])
def test_waiting_for_something_that_is_not_an_event_raises_as_on_cuda(not_an_event):
    # torch.cuda.Stream.wait_event calls event.wait(self); torch.Stream's C++ method casts its
    # argument to an event unchecked (before: None was accepted, reading garbage as an event).
    s = torch.vdev.Stream()
    with pytest.raises(AttributeError, match="has no attribute 'wait'"):
        s.wait_event(not_an_event)
    with pytest.raises(AttributeError, match="has no attribute 'record_event'"):
        s.wait_stream(not_an_event)
    with pytest.raises(AttributeError):
        torch.vdev.current_stream().wait_event(not_an_event)


def test_stream_context_and_set_stream_are_per_thread_and_per_device():
    s1 = torch.vdev.Stream(1)
    with torch.vdev.stream(s1):
        assert torch.vdev.current_device() == 1
        assert torch.vdev.current_stream() == s1
        assert torch.vdev.current_stream(0) == torch.vdev.default_stream(0)
        seen = []
        th = threading.Thread(target=lambda: seen.append(torch.vdev.current_stream(1)))
        th.start()
        th.join()
        assert seen == [torch.vdev.default_stream(1)]
    assert torch.vdev.current_device() == 0
    assert torch.vdev.current_stream(1) == torch.vdev.default_stream(1)
    with s1:  # torch.Stream as a context manager
        assert torch.accelerator.current_stream(1) == s1
    torch.vdev.set_stream(s1)
    assert torch.vdev.current_stream(1) == s1 and torch.vdev.current_device() == 1
    torch.vdev.set_stream(torch.vdev.default_stream(1))
    torch.vdev.set_device(0)


def test_a_failing_task_surfaces_at_the_next_synchronize_and_the_stream_stays_usable():
    s = torch.vdev.Stream()
    with gated(s):
        rt.enqueue_failure(*sid(s), "kernel exploded")
        e = s.record_event()
        waiter = torch.vdev.Stream(0)
        waiter.wait_event(e)
    wait_until_idle(s)  # the gate is open: wait for the failure to have run
    for _ in range(2):  # query reports the error, as CUDA's does, and leaves it pending
        with pytest.raises(RuntimeError, match="kernel exploded"):
            s.query()
    with pytest.raises(RuntimeError, match=r"\[test_failure\] kernel exploded \(on vdev:0 stream"):
        s.synchronize()
    s.synchronize()  # reported once
    assert s.query()
    with pytest.raises(RuntimeError, match="kernel exploded"):
        e.synchronize()  # the event carries the error
    with pytest.raises(RuntimeError, match=r"\[wait_event\].*kernel exploded"):
        waiter.synchronize()  # ... to the stream that waited on it
    log = rt.Log()
    log_on(s, log, 1)
    s.synchronize()
    assert log.values() == [1]


def test_errors_surface_at_the_next_enqueue_too():
    s = torch.vdev.Stream()
    rt.enqueue_failure(*sid(s), "late")
    wait_until_idle(s)  # wait for the failure to have run, without synchronizing or raising
    with pytest.raises(RuntimeError, match="late"):
        rt.enqueue_noop(*sid(s))
    rt.enqueue_noop(*sid(s))
    s.synchronize()


def test_device_synchronize_covers_every_stream_of_that_device_only():
    streams = [torch.vdev.Stream(1) for _ in range(3)] + [torch.vdev.default_stream(1)]
    log = rt.Log()
    with gated(streams[0]) as gate:
        for i, s in enumerate(streams):
            log_on(s, log, i)
        wait_until_blocked(gate)
        torch.vdev.synchronize(0)  # other device: returns although vdev:1 is blocked
        assert 0 not in log.values()
        opener = threading.Thread(target=gate.open)
        opener.start()
        torch.vdev.synchronize(1)
        opener.join()
        assert sorted(log.values()) == [0, 1, 2, 3]
        assert all(s.query() for s in streams)


def test_blocking_copy_waits_only_for_its_own_stream():
    other = torch.vdev.Stream()
    with gated(other) as gate:
        wait_until_blocked(gate)
        x = torch.arange(4.0).to("vdev")  # current (default) stream: not blocked by `other`
        assert x.cpu().tolist() == [0, 1, 2, 3]
        assert gate.waiting() == 1


def test_non_blocking_host_to_device_from_pinned_memory_returns_before_the_copy():
    s = torch.vdev.current_stream()
    pinned = torch.arange(1000.0).pin_memory()
    dst = torch.zeros(1000, device="vdev")
    with gated(s):
        dst.copy_(pinned, non_blocking=True)
        assert not s.query()
    assert dst.cpu().tolist() == list(range(1000))


def test_non_blocking_host_to_device_from_pageable_memory_is_synchronous_as_on_cuda():
    # CUDA synchronizes the stream before a copy from pageable memory, so the copy has happened
    # when the call returns: the source may be reused at once. The sync debug mode reports the
    # hidden wait (tests/streams/test_sync_debug.py).
    src = torch.arange(1000.0)
    dst = torch.zeros(1000, device="vdev")
    dst.copy_(src, non_blocking=True)
    src.fill_(-1)
    assert dst.cpu().tolist() == list(range(1000))


def test_non_blocking_device_to_host_into_pinned_memory_returns_early():
    x = torch.arange(256, dtype=torch.int32, device="vdev:1")
    host = torch.zeros(256, dtype=torch.int32).pin_memory()
    assert host.is_pinned() and not torch.zeros(2).is_pinned()
    s = torch.vdev.current_stream(1)
    with gated(s):
        host.copy_(x, non_blocking=True)
        with torch.vdev.sanitizer.sanitize(""):  # a read before the copy ran, on purpose
            assert host.sum().item() == 0  # host memory, readable now: the copy has not run
        assert not s.query()
    s.synchronize()
    assert host.tolist() == list(range(256))
    # As on CUDA, .to("cpu", non_blocking=True) returns pinned memory filled asynchronously ...
    y = x.to("cpu", non_blocking=True)
    assert y.is_pinned()
    s.synchronize()
    assert y.tolist() == list(range(256))
    # ... while a copy into pageable memory is synchronous even with non_blocking=True.
    pageable = torch.empty(256, dtype=torch.int32)
    pageable.copy_(x, non_blocking=True)
    assert pageable.tolist() == list(range(256))


def test_cross_device_copy_waits_then_completes():
    a = torch.arange(100.0, device="vdev:0")
    s0, s1 = torch.vdev.current_stream(0), torch.vdev.current_stream(1)
    with gated(s0):
        b = a.to("vdev:1")
        assert not s0.query() and not s1.query()  # vdev:1's stream waits for the copy
    assert (b * 2).cpu().tolist() == [2.0 * i for i in range(100)]


def test_non_blocking_copy_does_not_lose_the_source_when_freed_early():
    s = torch.vdev.current_stream()
    host = torch.full((1 << 16,), 7.0).pin_memory()
    with gated(s):
        dev = torch.empty(1 << 16, device="vdev")
        dev.copy_(host, non_blocking=True)
        del host  # the queued copy keeps the pinned block alive ...
        other = torch.zeros(1 << 16).pin_memory()  # ... so this cannot be given the same block
    assert dev.sum().item() == 7.0 * (1 << 16)
    assert other.sum().item() == 0


def test_many_host_threads_enqueue_without_loss_or_reordering():
    shared = torch.vdev.Stream(1)
    private = [torch.vdev.Stream(i % 2) for i in range(8)]
    shared_log, logs = rt.Log(), [rt.Log() for _ in range(8)]

    def worker(t):
        for i in range(2000):
            log_on(shared, shared_log, t * 1_000_000 + i)
            log_on(private[t], logs[t], i)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    torch.vdev.synchronize(0)
    torch.vdev.synchronize(1)
    values = shared_log.values()
    assert len(values) == 8 * 2000
    for t in range(8):
        mine = [v % 1_000_000 for v in values if v // 1_000_000 == t]
        assert mine == list(range(2000))
        assert logs[t].values() == list(range(2000))


def test_native_handle_identifies_the_runtime_stream():
    a, b = torch.vdev.Stream(), torch.vdev.Stream()
    assert a.native_handle != 0 and a.native_handle != b.native_handle
    again = torch.Stream(stream_id=a.stream_id, device_index=0, device_type=a.device_type)
    assert again.native_handle == a.native_handle


# Operators that still run synchronously on the calling thread (data-dependent shapes, host
# results, meta kernels that disagree with CPU's): each must wait for work queued before it.
SYNCHRONOUS_OPS = {
    "nonzero": lambda x, a: x.nonzero().flatten(),
    "masked_select": lambda x, a: x.masked_select(x > 500),
    "unique": lambda x, a: torch.unique(x),
    "equal": lambda x, a: torch.tensor(torch.equal(x, a["ref"])),
}


@pytest.mark.parametrize("name", sorted(SYNCHRONOUS_OPS))
def test_synchronous_operators_wait_for_work_queued_on_their_stream(name):
    op, src = SYNCHRONOUS_OPS[name], torch.arange(1000.0)
    aux_cpu = {
        "ref": src.clone(),
        "mean": torch.zeros(100),
        "var": torch.ones(100),
        "idx": torch.tensor([[1, 2], [3, 99]]),
    }
    expected = op(src, aux_cpu)  # before the copy x is all zeros: a stale read gives another value
    s = torch.vdev.Stream()  # their stream: the current one, not the default stream
    with torch.vdev.stream(s):
        aux = {k: v.to("vdev") for k, v in aux_cpu.items()}
        x = torch.zeros(1000, device="vdev")
        pinned = src.pin_memory()
        s.synchronize()
        with gated(s) as gate:
            x.copy_(pinned, non_blocking=True)  # queued behind the gate
            copied = torch.vdev.Event()
            copied.record(s)
            wait_until_blocked(gate)
            # The operator makes the host wait, decided at the call. Also fails if it became
            # queued: this test must keep covering the synchronous path (move such an operator
            # elsewhere).
            assert_refused_before_waiting(on_stream(s, lambda: op(x, aux)))
            assert not copied.query()  # the copy is still queued
        # The gate is open, the copy may not have run yet: the operator returns once it has.
        got = op(x, aux)
        assert copied.query()
        torch.testing.assert_close(got.cpu(), expected)
        # It waits for its stream: a failure queued there before it is its to raise.
        assert_raises_failure_queued_on(s, lambda: op(x, aux))
    torch.testing.assert_close(op(x, aux).cpu(), expected)  # nothing was lost


def test_a_freed_block_is_reused_at_once_on_its_stream_in_stream_order():
    # CUDA's caching allocator semantics: a tensor freed while queued work still uses it goes back
    # to its stream's pool at once; the next allocation on that stream may take it, because its
    # work is queued after the pending work.
    s = torch.vdev.current_stream()
    src = torch.arange(float(1 << 18)).pin_memory()
    with gated(s):
        x = torch.empty(1 << 18, device="vdev")
        x_ptr = x.data_ptr()
        x.copy_(src, non_blocking=True)
        del x  # the host frees it; the queued copy still writes it
        y = torch.empty(1 << 18, device="vdev")
        assert y.data_ptr() == x_ptr
        y.mul_(2)  # queued after the copy into the same bytes
        assert not s.query()
    assert torch.equal(y.cpu(), src * 2)


def test_a_freed_block_is_not_reused_by_another_stream():
    s, other = torch.vdev.current_stream(), torch.vdev.Stream()
    with gated(s):
        x = torch.empty(1 << 18, device="vdev")
        x_ptr = x.data_ptr()
        x.fill_(1)
        del x
        with torch.vdev.stream(other):
            y = torch.empty(1 << 18, device="vdev")
        assert y.data_ptr() != x_ptr


def test_record_stream_defers_reuse_until_the_other_streams_work_has_finished():
    # x's block must be the best free fit when w is allocated: tensors of earlier tests that only
    # the cyclic collector frees (tracebacks kept by pytest.raises) would share a segment with x,
    # and best fit would then pick another block. 3 MiB: the large pool, where small leftovers
    # (PyTorch's own autograd cycles, which no collector frees) do not go.
    gc.collect()
    torch.vdev.synchronize()
    torch.vdev.empty_cache()
    s, other = torch.vdev.current_stream(), torch.vdev.Stream()
    x = torch.zeros(3 << 18, device="vdev")
    x_ptr = x.data_ptr()
    other.wait_stream(s)
    with gated(other) as gate:
        with torch.vdev.stream(other):
            x.add_(1)  # x is used on `other`, behind the gate
        x.record_stream(other)
        del x
        z = torch.empty(3 << 18, device="vdev")  # same stream, same size: x's block is not free
        assert z.data_ptr() != x_ptr
        assert torch.accelerator.memory_stats(0)["active.all.current"] >= 2
        gate.open()
    other.synchronize()
    w = torch.empty(3 << 18, device="vdev")
    assert w.data_ptr() == x_ptr


def test_resizing_waits_for_queued_work_on_every_stream_of_the_device():
    other = torch.vdev.Stream()
    x = torch.zeros(1000, device="vdev")
    src = torch.arange(1000.0).pin_memory()
    # The copy comes after x's zero fill (queued on the current stream), as CUDA code must order
    # it: unordered, the fill could run last (the 50 ms this test used to sleep hid that).
    other.wait_stream(torch.vdev.current_stream())
    with gated(other) as gate:
        with torch.vdev.stream(other):
            x.copy_(src, non_blocking=True)  # queued on `other`, holding x's storage
        copied = torch.vdev.Event()
        copied.record(other)
        wait_until_blocked(gate)
        assert not copied.query()
    # The gate is open, the copy may not have run yet: resize_ replaces the block, so it returns
    # only once the copy has run, or the copy is lost.
    x.resize_(5000)
    assert copied.query()
    assert x[:1000].cpu().tolist() == list(range(1000))
    # It waits for every stream of the device, not only the current one: a failure queued on
    # `other` is its to raise, before it changes anything: y keeps its sizes and its storage.
    y = torch.arange(1000.0, device="vdev")
    storage = y.untyped_storage()
    ptr, nbytes = storage.data_ptr(), storage.nbytes()
    assert_raises_failure_queued_on(other, lambda: y.resize_(5000))
    assert (storage.data_ptr(), storage.nbytes()) == (ptr, nbytes)
    assert y.shape == (1000,)
    assert y.cpu().tolist() == list(range(1000))
    y.resize_(5000)  # and a later resize_ grows it
    assert y.untyped_storage().nbytes() == 5000 * 4 and y[:1000].cpu().tolist() == list(range(1000))
