"""vccl's stream semantics, in this process (a group of one rank over a HashStore): collectives
are ordered after the caller's queued work, Work.wait() orders the caller's stream without
blocking the host, memory in flight is not reused, futures chain, and bad calls raise at the call;
DistributedDataParallel's reducer timer measures on the device's stream. Controlled with gates
(tests/asyncutil.py), never with timing: where a time is checked, it is a lower bound that a gate
held open for that long guarantees."""

from __future__ import annotations

import threading
import time

import pytest
import torch
import torch.distributed as dist
from asyncutil import gated, run_bounded, sid, wait_until_blocked
from torch.distributed.distributed_c10d import BackendConfig
from torch.nn.parallel import DistributedDataParallel

from torch_vdev import _testing as rt


@pytest.fixture(scope="module")
def group():
    dist.init_process_group("vccl", store=dist.HashStore(), rank=0, world_size=1)
    yield dist.group.WORLD
    dist.destroy_process_group()


def test_vccl_is_the_backend_of_vdev_however_it_is_asked_for():
    assert dist.Backend.default_device_backend_map["vdev"] == "vccl"
    assert "vccl" in dist.Backend.backend_list
    cases = {
        "undefined": {"vdev": "vccl"},  # init_process_group() with vdev as the accelerator
        "vccl": {"vdev": "vccl"},
        "cpu:gloo,vdev:vccl": {"cpu": "gloo", "vdev": "vccl"},
    }
    for spec, expected in cases.items():
        assert BackendConfig(dist.Backend(spec)).get_device_backend_map() == expected


def test_collective_runs_after_the_callers_queued_work_without_blocking_the_host(group):
    src = torch.zeros(4, device="vdev")
    out = torch.full((4,), -1.0, device="vdev")
    stream = torch.vdev.current_stream()
    with gated(stream):
        src.fill_(5.0)  # queued behind the gate
        work = dist.all_gather_into_tensor(out, src, async_op=True)
        assert not work.is_completed()
        # wait() makes the current stream wait; on the host it returns at once (a blocking wait
        # would never return here: the gate opens only when this block exits).
        assert run_bounded(work.wait, timeout=60)
        assert not work.is_completed()
    assert out.tolist() == [5.0] * 4
    torch.vdev.synchronize()
    assert work.is_completed() and work.is_success() and work.exception() is None


def test_memory_in_flight_is_not_reused_until_the_collective_ran(group):
    stream = torch.vdev.current_stream()
    with gated(stream):
        x = torch.full((4096,), 3.0, device="vdev")
        ptr = x.data_ptr()
        work = dist.all_reduce(x, async_op=True)
        del x  # freed on the host while the collective is queued
        y = torch.empty(4096, device="vdev")  # same size, same stream: would reuse the block
        assert y.data_ptr() != ptr
    work.wait()


def test_future_and_then_are_ordered_after_the_collective(group):
    x = torch.full((3,), 2.0, device="vdev")
    with gated(torch.vdev.current_stream()):
        x.mul_(4.0)
        work = dist.all_reduce(x, async_op=True)
        chained = work.get_future().then(lambda f: f.value()[0] + 1)
    assert chained.wait().tolist() == [9.0] * 3
    assert work.get_future().value()[0].tolist() == [8.0] * 3


def test_barrier_waits_for_the_groups_queued_collectives(group):
    x = torch.ones(8, device="vdev")
    work = dist.all_reduce(x, async_op=True)
    dist.barrier()  # as NCCL's: the host returns once the device has passed it
    assert work.is_completed()


def test_bad_calls_raise_at_the_call_and_lose_nothing(group, device_count):
    kept = torch.arange(4.0, device="vdev")
    x = torch.ones(4, device="vdev")
    with pytest.raises(ValueError, match="PREMUL_SUM is not supported"):
        dist.all_reduce(x, op=dist._make_nccl_premul_sum(2.0))
    with pytest.raises(ValueError, match="must be contiguous"):
        dist.all_reduce(torch.ones(4, 4, device="vdev").t())
    with pytest.raises(ValueError, match="world_size \\(1\\) tensors, got 2"):
        dist.all_gather([torch.empty(4, device="vdev")] * 2, x)
    with pytest.raises(ValueError, match="world_size \\(1\\) times"):
        dist.all_gather_into_tensor(torch.empty(3, device="vdev"), x)
    with pytest.raises(RuntimeError, match="No backend type associated with device type cpu"):
        dist.all_reduce(torch.ones(2))  # as with NCCL alone: CPU tensors need "cpu:gloo,..."
    if device_count >= 2:
        dist.all_reduce(x)  # binds the group to vdev:0
        with pytest.raises(ValueError, match="runs on vdev:0"):
            dist.all_reduce(torch.ones(2, device="vdev:1"))
    assert kept.tolist() == [0.0, 1.0, 2.0, 3.0]
    dist.all_reduce(x)
    assert x.tolist() == [1.0] * 4


def _float8(n):
    return torch.ones(n).to(torch.float8_e4m3fn).to("vdev")


# Calls whose arguments alone are wrong: (call, exception type, message). Each raises at the call,
# as Gloo or NCCL checks it on the host, and leaves the group working (Gloo's own check would run
# in the queued task, fail it and break the group for good).
BAD_CALLS = {
    "broadcast src": (
        lambda x: dist.broadcast(x, src=5),
        dist.DistBackendError,
        "invalid root rank: 5",
    ),
    "reduce dst": (lambda x: dist.reduce(x, dst=-1), dist.DistBackendError, "invalid root rank"),
    "gather dst": (lambda x: dist.gather(x, None, dst=5), ValueError, "invalid root rank: 5"),
    "scatter src": (lambda x: dist.scatter(x, None, src=5), ValueError, "invalid root rank: 5"),
    "float8 all_reduce": (
        lambda x: dist.all_reduce(_float8(4)),
        RuntimeError,
        "Unsupported Float8 type for vccl reduction: Float8_e4m3fn",
    ),
    "float8 reduce_scatter": (
        lambda x: dist.reduce_scatter_tensor(_float8(4), _float8(4)),
        RuntimeError,
        "Unsupported Float8 type",
    ),
    "int16": (
        lambda x: dist.broadcast(x.short(), src=0),
        TypeError,
        "Input tensor data type is not supported for vccl process group: Short",
    ),
    "bool AVG": (
        lambda x: dist.all_reduce(x.bool(), op=dist.ReduceOp.AVG),
        TypeError,
        "Cannot use ReduceOp.AVG with boolean inputs",
    ),
    "float BXOR": (
        lambda x: dist.all_reduce(x, op=dist.ReduceOp.BXOR),
        RuntimeError,
        "Cannot use ReduceOp.BXOR with non-integral dtype",
    ),
    "all_gather size": (
        lambda x: dist.all_gather([torch.empty(5, device="vdev")], x),
        ValueError,
        "invalid tensor size at index 0",
    ),
    "gather size": (
        lambda x: dist.gather(x, [torch.empty(5, device="vdev")], dst=0),
        ValueError,
        "invalid tensor size at index 0",
    ),
    "scatter size": (
        lambda x: dist.scatter(x, [torch.empty(5, device="vdev")], src=0),
        ValueError,
        "invalid tensor size at index 0",
    ),
    "reduce_scatter size": (
        lambda x: dist.reduce_scatter(x, [torch.empty(5, device="vdev")]),
        ValueError,
        "invalid tensor size at index 0",
    ),
    "all_gather_into_tensor dtype": (
        lambda x: dist.all_gather_into_tensor(torch.empty(4, device="vdev").double(), x),
        TypeError,
        "must have the same type",
    ),
    "reduce_scatter_tensor dtype": (
        lambda x: dist.reduce_scatter_tensor(x, torch.empty(4, device="vdev").double()),
        TypeError,
        "must have the same type",
    ),
    "all_to_all size": (
        lambda x: dist.all_to_all([torch.empty(5, device="vdev")], [x]),
        ValueError,
        "invalid tensor size at index 0",
    ),
    "all_to_all_single numel": (
        lambda x: dist.all_to_all_single(torch.empty(5, device="vdev"), x),
        ValueError,
        "Tensors are not equal in size",
    ),
    "all_to_all_single splits": (
        lambda x: dist.all_to_all_single(x, x.clone(), [3], [5]),
        RuntimeError,
        "Split sizes doesn't match total dim 0 size",
    ),
    "send peer": (lambda x: dist.send(x, dst=5), ValueError, "invalid peer rank: 5"),
    "recv peer": (lambda x: dist.recv(x, src=5), ValueError, "invalid peer rank: 5"),
    "isend to itself": (
        lambda x: dist.isend(x, dst=0),
        NotImplementedError,
        "with this rank itself",
    ),
}


@pytest.mark.parametrize("case", BAD_CALLS, ids=str)
def test_argument_errors_raise_at_the_call_and_the_group_keeps_working(group, case):
    call, error, match = BAD_CALLS[case]
    x = torch.ones(4, device="vdev")
    with pytest.raises(error, match=match):
        call(x)
    # Nothing was queued: no error surfaces later, and the group's next collective runs.
    torch.vdev.synchronize()
    y = torch.full((3,), 2.0, device="vdev")
    dist.all_reduce(y)
    torch.vdev.synchronize()
    assert y.tolist() == [2.0] * 3


def test_integer_avg_is_the_sum_divided_as_nccl_divides(group):
    x = torch.tensor([7, -7, 3], device="vdev")
    dist.all_reduce(x, op=dist.ReduceOp.AVG)  # one rank: the sum divided by 1
    assert x.tolist() == [7, -7, 3] and x.dtype == torch.int64
    o = torch.empty(3, dtype=torch.int32, device="vdev")
    dist.reduce_scatter_tensor(
        o, torch.tensor([1, 2, 3], dtype=torch.int32, device="vdev"), op=dist.ReduceOp.AVG
    )
    assert o.tolist() == [1, 2, 3]


# DDP's reducer timer (cpp/backend/distributed/reducer_timer.h). DistributedDataParallel samples
# iterations 1 to 10 (then every 100th), and the forward of iteration k + 1 measures iteration k.
DDP_TIMES = (
    "forward_compute_time",
    "backward_compute_time",
    "backward_comm_time",
    "backward_compute_comm_overlap_time",
)


def _ddp_times(model: DistributedDataParallel) -> dict:
    data = model._get_ddp_logging_data()
    return {key: data.get(key) for key in (*DDP_TIMES, "iteration")}


class _GateInForward(torch.nn.Module):
    """A linear layer, then the current stream held behind `gate` until it opens."""

    def __init__(self, gate):
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)
        self.gate = gate

    def forward(self, x):
        y = self.linear(x)
        rt.enqueue_gate(*sid(torch.vdev.current_stream()), self.gate)
        return y


def test_ddp_times_are_device_time_on_the_current_stream(group):
    """The forward's device work stays behind a gate for `held` seconds while the host runs on:
    the forward time DDP logs covers the hold, which only events on the stream can see (the host
    finished its forward long before). The timer waits for the marks it measures, so the second
    forward returns once the gate has opened."""
    held = 0.2
    gate = rt.Gate()
    model = DistributedDataParallel(_GateInForward(gate).to("vdev"), device_ids=[0])
    x = torch.randn(5, 8, device="vdev")

    def hold_then_open():
        try:
            wait_until_blocked(gate)
            time.sleep(held)
        finally:
            gate.open()  # always: a failing test never leaves the stream blocked

    opener = threading.Thread(target=hold_then_open, daemon=True)
    opener.start()
    model(x).sum().backward()  # iteration 1, held on the device
    model(x).sum().backward()  # measures iteration 1
    opener.join(60)
    times = _ddp_times(model)
    assert times["iteration"] == 1
    assert times["forward_compute_time"] >= held * 1e9, times  # nanoseconds
    assert times["backward_compute_time"] > 0 and times["backward_comm_time"] > 0, times


def test_ddp_timer_measures_nothing_for_events_not_recorded(group, capfd):
    """A forward without backward records no backward or communication event: the next forward
    logs a forward time and nothing else (no error). An end older than its start (the backward
    of an earlier iteration) measures nothing either, not a negative time."""
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(8, 4).to("vdev"), device_ids=[0])
    x = torch.randn(5, 8, device="vdev")
    model(x)  # iteration 1: forward only
    model(x).sum().backward()  # measures iteration 1
    times = _ddp_times(model)
    assert times["iteration"] == 1 and times["forward_compute_time"] > 0, times
    assert all(times[key] == 0 for key in DDP_TIMES[1:]), times
    model(x)  # iteration 3: forward only, after a full iteration 2
    model(x).sum().backward()  # measures iteration 3
    times = _ddp_times(model)
    assert times["iteration"] == 3 and times["forward_compute_time"] > 0, times
    assert times["backward_compute_time"] == 0, times  # iteration 2's end, 3's start
    assert "Time stats are currently only collected" not in capfd.readouterr().err


def test_ddp_timer_leaves_an_earlier_failure_to_the_stream(group):
    """Marks recorded after a failed task carry its error: the timer measures nothing for them
    instead of raising it as an event's error, and the stream raises the failure itself, once, at
    the forward's next enqueue. (A forward only: no collective, so the group stays healthy.)"""
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(8, 4).to("vdev"), device_ids=[0])
    x = torch.randn(5, 8, device="vdev")
    stream = torch.vdev.current_stream()
    message = "failed before DDP's events were recorded"
    with gated(stream):
        rt.enqueue_failure(*sid(stream), message)
        model(x)  # iteration 1, queued behind the failure: its events carry the error
    try:
        with pytest.raises(RuntimeError, match=message) as raised:
            model(x)  # measures iteration 1, then queues its forward
        assert "event recorded after a failed operation" not in str(raised.value)
    except AssertionError:
        try:
            stream.synchronize()  # where the failure is still pending, no later test meets it
        except RuntimeError as e:
            if message not in str(e):
                raise
        raise
    torch.vdev.synchronize()  # raised once: nothing left
    assert _ddp_times(model)["forward_compute_time"] == 0


def test_ddp_iteration_captured_in_a_graph_measures_nothing_and_the_capture_holds(group):
    """A captured iteration's events are recorded in the capture and never complete: the next
    forward measures nothing for it, without waiting on them (which would invalidate the capture
    or hang), and the graph replays."""
    side = torch.vdev.Stream()
    with torch.vdev.stream(side):  # DDP's autograd nodes on the capture stream, as CUDA wants
        torch.manual_seed(0)
        model = DistributedDataParallel(
            torch.nn.Linear(8, 4).to("vdev"), device_ids=[0], static_graph=True
        )
        x = torch.randn(5, 8, device="vdev")
        for _ in range(3):  # iterations 1 to 3, eager
            model(x).sum().backward()
    graph = torch.vdev.VdevGraph()
    with torch.vdev.graph(graph, stream=side):
        model(x).sum().backward()  # iteration 4, captured; its forward measures iteration 3
    times = _ddp_times(model)
    assert times["iteration"] == 3 and times["forward_compute_time"] > 0, times
    with torch.vdev.stream(side):
        graph.replay()  # on the stream the model's other work runs on
        model(x).sum().backward()  # measures iteration 4
    times = _ddp_times(model)
    assert times["iteration"] == 4
    assert all(times[key] == 0 for key in DDP_TIMES), times
    torch.vdev.synchronize()
