"""Pinned host memory (issue 5): a caching host allocator, blocks not reused while queued copies
use them, DataLoader(pin_memory=True) with vdev as the accelerator."""

import pytest
import torch
from asyncutil import gated
from torch.utils.data import DataLoader, TensorDataset

import torch_vdev


def host_stats():
    return torch.vdev.host_memory_stats()


def test_pin_memory_and_is_pinned():
    x = torch.arange(10.0)
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p.is_pinned() and p[3:].is_pinned()  # interior pointers too
    assert torch.equal(p, x)
    assert torch.empty(4, pin_memory=True).is_pinned()
    assert p.to("vdev").to("cpu", non_blocking=True).is_pinned()  # as on CUDA


def test_freed_pinned_blocks_are_cached_and_reused():
    p = torch.empty(1000).pin_memory()
    ptr = p.data_ptr()
    allocs = host_stats()["num_host_alloc"]
    del p
    q = torch.empty(900).pin_memory()  # same size class (4096 bytes)
    assert q.data_ptr() == ptr
    assert host_stats()["num_host_alloc"] == allocs
    assert host_stats()["active_requests.current"] >= 1


def test_a_pinned_block_is_not_reused_while_a_copy_from_it_is_pending():
    s = torch.vdev.current_stream()
    d = torch.empty(1 << 16, device="vdev")
    with gated(s):
        src = torch.full((1 << 16,), 7.0).pin_memory()
        ptr = src.data_ptr()
        d.copy_(src, non_blocking=True)  # reads src when the gate opens
        del src
        other = torch.full((1 << 16,), -1.0).pin_memory()  # must not overwrite the source
        assert other.data_ptr() != ptr
    assert d.cpu().unique().tolist() == [7.0]
    del other
    # The copy ran: src's block is free again (and reused by one of the next two requests).
    again = [torch.empty(1 << 16).pin_memory() for _ in range(2)]
    assert ptr in [t.data_ptr() for t in again]


def test_record_event_holds_a_pinned_block_until_the_stream_passes_it():
    # HostAllocator::record_event, which torch's own code calls after queueing work that uses a
    # pinned block: the block is not reused until that stream has run the work queued so far.
    other = torch.vdev.Stream()
    with gated(other) as gate:
        p = torch.empty(1 << 12).pin_memory()
        ptr = p.data_ptr()
        assert torch_vdev._testing.host_record_event(
            p.data_ptr(), other.device_index, other.stream_id
        )
        del p
        q = torch.empty(1 << 12).pin_memory()
        assert q.data_ptr() != ptr
        gate.open()
    other.synchronize()
    del q
    r = torch.empty(1 << 12).pin_memory()
    s = torch.empty(1 << 12).pin_memory()
    assert ptr in (r.data_ptr(), s.data_ptr())


def test_empty_host_cache_returns_cached_blocks():
    p = torch.empty(1 << 20).pin_memory()
    del p
    before = host_stats()
    assert before["allocations.current"] > before["active_requests.current"]
    torch.vdev.empty_host_cache()
    after = host_stats()
    assert after["allocations.current"] == after["active_requests.current"]
    assert after["num_host_free"] > before["num_host_free"]
    torch.vdev.reset_peak_host_memory_stats()
    assert host_stats()["allocated_bytes.peak"] == host_stats()["allocated_bytes.current"]
    torch.vdev.reset_accumulated_host_memory_stats()
    assert host_stats()["num_host_alloc"] == 0


@pytest.mark.parametrize("num_workers", [0, 2])
def test_dataloader_pins_batches_for_vdev(num_workers):
    ds = TensorDataset(torch.arange(100.0).view(50, 2), torch.arange(50))
    loader = DataLoader(
        ds,
        batch_size=8,
        pin_memory=True,
        num_workers=num_workers,
        multiprocessing_context="spawn" if num_workers else None,
    )
    total = torch.zeros((), device="vdev")
    count = 0
    for x, y in loader:
        assert x.is_pinned() and y.is_pinned()
        total += x.to("vdev", non_blocking=True).sum() + y.to("vdev", non_blocking=True).sum()
        count += len(y)
    assert count == 50
    assert total.item() == sum(range(100)) + sum(range(50))
