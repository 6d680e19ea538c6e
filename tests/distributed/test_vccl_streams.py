"""vccl's stream semantics, in this process (a group of one rank over a HashStore): collectives
are ordered after the caller's queued work, Work.wait() orders the caller's stream without
blocking the host, memory in flight is not reused, futures chain, and bad calls raise at the call.
Controlled with gates (tests/asyncutil.py), never with timing."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from asyncutil import gated, run_bounded
from torch.distributed.distributed_c10d import BackendConfig


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
