"""Device memory like an accelerator's (issue 5): protected from the host, finite, cached with
statistics, out-of-memory errors like CUDA's."""

import gc
import os
import re
import signal
import sys

import pytest
import torch

from child_process import run_python
from torch_vdev import _testing as rt

MiB = 1 << 20

# The statistic names of torch.cuda.memory_stats (its documentation lists them).
CUDA_STAT_ARRAYS = [
    "allocation",
    "segment",
    "active",
    "inactive_split",
    "allocated_bytes",
    "reserved_bytes",
    "active_bytes",
    "inactive_split_bytes",
    "requested_bytes",
]
CUDA_COUNTERS = [
    "num_alloc_retries",
    "num_ooms",
    "num_sync_all_streams",
    "num_device_alloc",
    "num_device_free",
]


def stats(device=0):
    return torch.vdev.memory_stats(device)


@pytest.mark.parametrize(
    "access",
    [
        "ctypes.c_float.from_address(x.data_ptr() + 40).value",
        "numpy.frombuffer((ctypes.c_char * 64).from_address(x.data_ptr() + 40), numpy.uint8).sum()",
    ],
    ids=["ctypes", "numpy"],
)
@pytest.mark.parametrize("faulthandler", [False, True])
def test_host_access_to_device_memory_dies_with_a_diagnostic(access, faulthandler):
    r = run_python(
        f"""
        import ctypes, faulthandler, sys
        import numpy
        import torch
        if {faulthandler}:
            faulthandler.enable()
        x = torch.arange(1000.0, device="vdev")
        torch.vdev.synchronize()
        print(hex(x.data_ptr() + 40), flush=True)
        {access}
        print("survived", flush=True)
        """
    )
    assert "survived" not in r.stdout
    assert r.returncode in (-signal.SIGSEGV, -signal.SIGBUS), (r.returncode, r.stderr)
    address = r.stdout.strip()
    assert f"the host touched device memory at {address} on vdev:0" in r.stderr, r.stderr
    match = re.search(r"inside the device allocation (0x[0-9a-f]+) of (\d+) bytes", r.stderr)
    assert match, r.stderr
    start, size = int(match.group(1), 16), int(match.group(2))
    assert start <= int(address, 16) < start + size
    assert "device memory is not host-accessible" in r.stderr
    if faulthandler:  # the previous handler still runs: Python's stack is printed too
        assert "Fatal Python error: Segmentation fault" in r.stderr


def test_a_fault_outside_device_memory_goes_to_the_previous_handler_untouched():
    r = run_python(
        """
        import ctypes, faulthandler
        import torch
        faulthandler.enable()  # installed before vdev's handler (the first allocation)
        x = torch.ones(4, device="vdev")
        torch.vdev.synchronize()
        ctypes.string_at(8)  # a host fault that is not in device memory
        print("survived", flush=True)
        """
    )
    assert "survived" not in r.stdout
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stderr)
    assert "Fatal Python error: Segmentation fault" in r.stderr  # faulthandler ran
    assert "vdev:" not in r.stderr  # and vdev said nothing about a fault that is not its own


def test_kernels_and_copies_reach_the_bytes_the_host_cannot():
    x = torch.arange(10.0, device="vdev")
    y = (x * 2).cpu()
    assert y.tolist() == [2.0 * i for i in range(10)]
    addr = x.data_ptr()
    assert rt.pointer_device(addr) == 0


def test_device_memory_capacity_is_enforced_and_device_keeps_working():
    r = run_python(
        """
        import torch
        keep = torch.full((1000,), 3.0, device="vdev")
        try:
            torch.empty(2**20, device="vdev")  # 4 MiB > 1 MiB capacity
        except torch.OutOfMemoryError as e:
            print("OOM", e)
        print(keep.sum().item(), torch.empty(1000, device="vdev").device)
        """,
        env={"VDEV_DEVICE_MEMORY": "1MiB"},
    )
    assert r.returncode == 0, r.stderr
    oom, after = r.stdout.strip().splitlines()
    assert "out of memory. Tried to allocate 4.00 MiB" in oom
    assert "total capacity of 1.00 MiB" in oom
    assert after == "3000.0 vdev:0"


def test_out_of_memory_is_raised_like_cuda_and_the_device_keeps_working():
    r = run_python(
        """
        import torch
        keep = torch.full((1000,), 3.0, device="vdev")
        cached = torch.empty(2 << 20, device="vdev")  # 8 MiB
        del cached  # stays reserved by the cache
        try:
            torch.empty(8 << 20, device="vdev")  # 32 MiB > 16 MiB capacity
        except torch.OutOfMemoryError as e:
            print("OOM", str(e).replace("\\n", " "))
        s = torch.vdev.memory_stats()
        print(s["num_ooms"], s["num_alloc_retries"], torch.vdev.memory_reserved())
        fresh = torch.empty(3 << 20, device="vdev")
        print(keep.sum().item(), (keep + 1).sum().item(), fresh.numel())
        """,
        env={"VDEV_DEVICE_MEMORY": "16MiB"},
    )
    assert r.returncode == 0, r.stderr
    oom, counts, after = r.stdout.strip().splitlines()
    assert "vdev out of memory. Tried to allocate 32.00 MiB." in oom
    assert "vdev:0 has a total capacity of 16.00 MiB" in oom
    assert re.search(r"of which [\d.]+ (MiB|KiB) is free", oom), oom
    assert re.search(r"[\d.]+ KiB is allocated by PyTorch", oom), oom
    assert "reserved by PyTorch but unallocated" in oom
    num_ooms, retries, reserved = map(int, counts.split())
    assert num_ooms == 1 and retries == 1
    assert reserved < 8 * MiB  # the cached 8 MiB were released before the error
    assert after == f"3000.0 4000.0 {3 << 20}"


def test_an_allocation_that_fits_once_the_cache_is_released_succeeds():
    r = run_python(
        """
        import torch
        a = torch.empty(10 << 20, device="vdev")  # 40 MiB
        del a
        assert torch.vdev.memory_reserved() >= 40 << 20
        b = torch.empty(12 << 20, device="vdev")  # 48 MiB: only fits without the cached 40 MiB
        s = torch.vdev.memory_stats()
        print(s["num_alloc_retries"], s["num_ooms"], s["num_device_free"])
        """,
        env={"VDEV_DEVICE_MEMORY": "64MiB"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "0", "1"]


def test_per_process_memory_fraction_limits_reservations():
    r = run_python(
        """
        import torch
        torch.vdev.set_per_process_memory_fraction(0.5)
        print(torch.vdev.get_per_process_memory_fraction())
        ok = torch.empty(5 << 20, device="vdev")  # 20 MiB of 32 allowed
        try:
            torch.empty(5 << 20, device="vdev")  # 40 MiB reserved > 32 MiB allowed
        except torch.OutOfMemoryError as e:
            print("OOM", "set_per_process_memory_fraction(0.5" in str(e))
        torch.vdev.set_per_process_memory_fraction(1.0)
        print(torch.empty(5 << 20, device="vdev").numel())
        """,
        env={"VDEV_DEVICE_MEMORY": "64MiB"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0.5", "OOM", "True", str(5 << 20)]


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: torch.vdev.set_per_process_memory_fraction(1.5), ValueError),
        (lambda: torch.vdev.set_per_process_memory_fraction(-0.1), ValueError),
        (lambda: torch.vdev.set_per_process_memory_fraction(1), TypeError),
        (lambda: torch.vdev.set_per_process_memory_fraction(0.5, 7), IndexError),
        (lambda: torch.vdev.memory_stats(7), IndexError),
        (lambda: torch.vdev.mem_get_info(7), IndexError),
    ],
)
def test_memory_functions_reject_bad_arguments(call, error):
    with pytest.raises(error) as e:
        call()
    assert re.search(r"1\.5|-0\.1|float|7", str(e.value)), str(e.value)
    assert torch.vdev.get_per_process_memory_fraction() == 1.0


def test_mem_get_info_is_capacity_minus_reserved():
    free, total = torch.vdev.mem_get_info(1)
    assert total == torch.vdev.get_device_properties(1).total_memory
    x = torch.empty(4 * MiB, device="vdev:1")
    free2, total2 = torch.vdev.mem_get_info(1)
    assert total2 == total
    assert free - free2 == torch.vdev.memory_reserved(1) - (total - free)
    assert torch.accelerator.get_memory_info(1) == (free2, total2)
    del x


def test_statistics_have_cuda_keys_and_follow_allocations():
    keys = set(stats())
    for name in CUDA_STAT_ARRAYS:
        for pool in ("all", "small_pool", "large_pool"):
            for field in ("current", "peak", "allocated", "freed"):
                assert f"{name}.{pool}.{field}" in keys
    for counter in CUDA_COUNTERS:
        assert counter in keys

    torch.vdev.synchronize()
    torch.vdev.empty_cache()
    torch.vdev.reset_peak_memory_stats()
    base = stats()
    small = torch.empty(1000, dtype=torch.uint8, device="vdev")  # 1000 B -> a 1024 B block
    large = torch.empty(3 * MiB, dtype=torch.uint8, device="vdev")  # large pool, 20 MiB segment
    s = stats()

    def delta(key):
        return s[key] - base[key]

    assert delta("allocation.all.current") == 2
    assert delta("allocation.small_pool.current") == 1
    assert delta("allocation.large_pool.current") == 1
    assert delta("allocated_bytes.small_pool.current") == 1024
    assert delta("allocated_bytes.large_pool.current") == 3 * MiB
    assert delta("requested_bytes.all.current") == 1000 + 3 * MiB
    assert delta("reserved_bytes.large_pool.current") == 20 * MiB
    assert delta("reserved_bytes.small_pool.current") in (0, 2 * MiB)
    assert s["active_bytes.all.current"] == s["allocated_bytes.all.current"]
    assert torch.vdev.memory_allocated() == s["allocated_bytes.all.current"]
    assert torch.vdev.max_memory_allocated() >= torch.vdev.memory_allocated()
    del small, large
    s = stats()
    assert s["allocated_bytes.all.current"] == base["allocated_bytes.all.current"]
    assert s["allocated_bytes.all.peak"] >= base["allocated_bytes.all.current"] + 3 * MiB + 1024
    assert s["allocated_bytes.all.freed"] - base["allocated_bytes.all.freed"] == 3 * MiB + 1024
    assert torch.vdev.memory_reserved() >= 20 * MiB  # cached, not returned
    torch.vdev.reset_peak_memory_stats()
    assert stats()["allocated_bytes.all.peak"] == stats()["allocated_bytes.all.current"]
    torch.vdev.reset_accumulated_memory_stats()
    s = stats()
    assert s["allocated_bytes.all.allocated"] == 0 and s["allocated_bytes.all.freed"] == 0
    assert s["num_alloc_retries"] == 0


def test_allocator_statistics_track_live_tensors():
    torch.vdev.synchronize()
    before = torch.accelerator.memory_allocated(1)
    x = torch.empty(1000, device="vdev:1")  # 4000 bytes -> 4096 with 256-byte rounding
    assert torch.accelerator.memory_allocated(1) - before == 4096
    assert rt.runtime_allocated_bytes(1) >= 4096
    free, total = torch.accelerator.get_memory_info(1)
    assert total == 4 << 30 and free <= total - 4096
    stats = torch.accelerator.memory_stats(1)
    assert stats["allocated_bytes.all.peak"] >= stats["allocated_bytes.all.current"]
    del x
    assert torch.accelerator.memory_allocated(1) == before


def release_leftovers():
    """Frees device tensors that earlier tests left reachable: the traceback of the last failed
    (or expected-to-fail) test keeps its frames, and their tensors, alive."""
    sys.last_type = sys.last_value = sys.last_traceback = None
    gc.collect()


def test_blocks_are_split_and_merged_within_a_segment():
    release_leftovers()
    torch.vdev.synchronize()
    torch.vdev.empty_cache()
    a = torch.empty(256, device="vdev")
    b = torch.empty(256, device="vdev")
    assert abs(a.data_ptr() - b.data_ptr()) == 1024  # neighbours in one 2 MiB segment
    assert stats()["segment.small_pool.current"] == 1
    assert stats()["inactive_split.small_pool.current"] == 1  # the rest of the segment
    del a
    assert stats()["inactive_split.small_pool.current"] == 2  # a's block and the rest
    del b
    s = stats()
    assert s["inactive_split.small_pool.current"] == 0  # merged back into one free segment
    assert s["inactive_split_bytes.small_pool.current"] == 0
    assert s["reserved_bytes.small_pool.current"] == 2 * MiB
    torch.vdev.empty_cache()
    assert stats()["reserved_bytes.all.current"] == 0


def device_memory_bytes(device: int) -> int:
    """Bytes of vdev:`device`'s memory that the system holds: the allocated size of the memfd
    behind its arena (runtime/arena.h; a released range is punched out of it). Unlike the
    process's RSS it counts nothing else the process allocates, and it is in bytes whatever the
    page size or huge-page setting."""
    name = f"/memfd:vdev:{device} (deleted)"
    files = {}  # by inode: the memfd may be open under several descriptors
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == name:
                st = os.stat(f"/proc/self/fd/{fd}")
                files[st.st_ino] = st.st_blocks * 512
        except OSError:  # closed meanwhile (the descriptor listdir itself used, for one)
            continue
    if not files:
        pytest.skip(f"vdev:{device}'s memory is not a memfd here (memfd_create refused)")
    return sum(files.values())


def test_empty_cache_returns_memory_to_the_system():
    release_leftovers()
    torch.vdev.synchronize()
    torch.vdev.empty_cache()
    torch.ones(1, device="vdev")  # the device's memory exists (its first allocation creates it)
    baseline = device_memory_bytes(0)  # what earlier tests still hold
    x = torch.ones(64 * MiB, dtype=torch.uint8, device="vdev")  # touches every page
    torch.vdev.synchronize()
    del x
    assert torch.vdev.memory_reserved() >= 64 * MiB
    cached = device_memory_bytes(0)
    assert cached - baseline >= 64 * MiB  # x's pages are held while its segment is cached
    torch.vdev.empty_cache()
    assert torch.vdev.memory_reserved() == 0
    assert device_memory_bytes(0) <= baseline  # ... and all of them went back to the system


def test_empty_cache_waits_for_queued_work_that_uses_a_cached_block():
    from asyncutil import gated, wait_until_blocked

    # 10 MiB: a segment of exactly its size, never split, so empty_cache really releases it.
    n = (10 * MiB) // 4
    src = torch.arange(float(n))
    x = torch.empty(n, device="vdev")
    x.copy_(src)
    y = torch.empty(n, device="vdev")
    torch.vdev.synchronize()
    s = torch.vdev.current_stream()
    with gated(s) as gate:
        torch.mul(x, 2, out=y)  # queued: reads x
        read = torch.vdev.Event()
        read.record(s)
        del x  # x's block is cached while the queued work still reads it
        wait_until_blocked(gate)
        before = torch.vdev.memory_stats()
        assert not read.query()
    # The gate is open, the mul may not have run yet: empty_cache must not give x's segment back
    # before it has, so it returns only once it has.
    torch.vdev.empty_cache()
    assert read.query()
    after = torch.vdev.memory_stats()
    # The allocator's own count of its waits for every stream of the device (CUDA's
    # num_sync_all_streams): one, for this release.
    assert after["num_sync_all_streams"] == before["num_sync_all_streams"] + 1
    assert after["num_device_free"] > before["num_device_free"]  # the segment was released
    assert before["reserved_bytes.all.current"] - after["reserved_bytes.all.current"] >= 10 * MiB
    assert torch.equal(y.cpu(), src * 2)  # released pages read as zeros


def test_memory_summary_names_the_device_and_the_statistics():
    x = torch.empty(1000, device="vdev:1")
    text = torch.vdev.memory_summary(1)
    assert "device 1" in text
    for row in ("Allocated memory", "Reserved memory", "Active memory", "Non-releasable memory"):
        assert row in text
    assert "from small pool" in text
    assert "from small pool" not in torch.vdev.memory_summary(1, abbreviated=True)
    del x


def test_threads_allocating_on_their_own_streams_keep_exact_accounting():
    import random

    from asyncutil import run_in_threads

    torch.vdev.synchronize(0)
    torch.vdev.synchronize(1)
    before = [torch.vdev.memory_stats(d)["requested_bytes.all.current"] for d in (0, 1)]

    def work(seed):
        rng = random.Random(seed)
        device = seed % 2
        torch.vdev.set_device(device)
        with torch.vdev.stream(torch.vdev.Stream()):
            held = []
            for i in range(200):
                n = rng.choice([16, 1000, 70_000, 600_000])
                t = torch.full((n,), float(i % 7), device=f"vdev:{device}")
                held.append((t, float(i % 7) * n))
                if len(held) > 5:
                    t, expected = held.pop(rng.randrange(len(held)))
                    assert t.sum().item() == expected
                if i % 50 == 0:
                    torch.vdev.empty_cache()

    errors = run_in_threads(work, 4)
    assert not errors, errors
    torch.vdev.synchronize(0)
    torch.vdev.synchronize(1)
    after = [torch.vdev.memory_stats(d)["requested_bytes.all.current"] for d in (0, 1)]
    assert after == before


def test_nested_stats_and_torch_cuda_deprecated_names():
    x = torch.ones(1000, device="vdev")
    nested = torch.vdev.memory_stats_as_nested_dict()
    flat = torch.vdev.memory_stats()
    assert nested["allocated_bytes"]["all"]["current"] == flat["allocated_bytes.all.current"]
    with pytest.warns(FutureWarning, match="renamed to `torch.vdev.memory_reserved`"):
        assert torch.vdev.memory_cached() == torch.vdev.memory_reserved()
    with pytest.warns(FutureWarning, match="renamed to `torch.vdev.max_memory_reserved`"):
        assert torch.vdev.max_memory_cached() == torch.vdev.max_memory_reserved()
    del x
    with pytest.warns(FutureWarning, match="reset_peak_memory_stats"):
        torch.vdev.reset_max_memory_allocated()
    assert torch.vdev.max_memory_allocated() == torch.vdev.memory_allocated()
    with pytest.warns(FutureWarning, match="reset_peak_memory_stats"):
        torch.vdev.reset_max_memory_cached()


def test_empty_cache_and_the_retry_release_a_block_another_stream_was_still_using():
    # A block freed while another stream's work uses it (record_stream) is released once that
    # work is done, by empty_cache and by an allocation's out-of-memory retry (CUDA's retry frees
    # its events first): the wait happens before the release decides what is free.
    import threading

    from asyncutil import gated

    s = torch.vdev.Stream()
    torch.vdev.synchronize()
    torch.vdev.empty_cache()
    x = torch.empty(8 << 20, dtype=torch.uint8, device="vdev")
    with gated(s) as gate:
        with torch.vdev.stream(s):
            x.add_(1)
        x.record_stream(s)
        del x
        threading.Thread(target=gate.open).start()
        torch.vdev.empty_cache()  # waits for s, then releases x's segment
    assert torch.vdev.memory_reserved() == 0
