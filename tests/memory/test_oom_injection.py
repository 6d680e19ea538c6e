"""Out-of-memory injection: VDEV_OOM_AFTER=N and torch.vdev.memory.inject_oom(after=N) make the
device allocation after the first N raise torch.OutOfMemoryError with the allocator's own (CUDA's)
message, once; the allocator's statistics, snapshot, history and observers stay consistent."""

from __future__ import annotations

import gc
import re

import pytest
import torch

from child_process import run_python

inject_oom = torch.vdev.memory.inject_oom

# CUDA's message with vdev's names (backend/memory/cache_stats.cpp), as a real out-of-memory
# error on vdev has it.
MESSAGE = re.compile(
    r"^vdev out of memory\. Tried to allocate (?P<size>[\d.]+ \w+)\. vdev:(?P<device>\d+) has a "
    r"total capacity of [\d.]+ \w+ of which [\d.]+ \w+ is free\. Of the allocated memory "
    r"[\d.]+ \w+ is allocated by PyTorch, and [\d.]+ \w+ is reserved by PyTorch but unallocated\."
    r" Freeing tensors or torch\.vdev\.empty_cache\(\) may help\.$"
)


def empty(n: int, device: str = "vdev") -> torch.Tensor:
    """One device allocation of n float32 (torch.empty allocates exactly its output)."""
    return torch.empty(n, device=device)


def test_the_allocation_after_the_first_n_raises_cudas_message_once():
    cached = empty(256)
    del cached  # back in the cache: the next request of this size is a cache hit
    ooms = torch.vdev.memory_stats()["num_ooms"]
    with inject_oom(after=3) as oom:
        kept = [empty(256), empty(0), empty(1000), empty(10, "vdev:1")]  # a hit, none, new, vdev:1
        with pytest.raises(torch.OutOfMemoryError) as info:
            empty(2048)  # the 4th allocation
        after = [empty(2048), empty(2048)]  # once only
    assert oom.fired
    match = MESSAGE.match(str(info.value))
    assert match, str(info.value)
    assert match["size"] == "8.00 KiB" and match["device"] == "0"
    assert torch.vdev.memory_stats()["num_ooms"] == ooms + 1
    assert all(t.device.type == "vdev" for t in kept + after)


def test_the_injected_message_has_the_form_of_a_real_out_of_memory_error():
    capacity = torch.vdev.get_device_properties(0).total_memory
    with pytest.raises(torch.OutOfMemoryError) as real:
        torch.empty(capacity + (1 << 20), dtype=torch.uint8, device="vdev")
    with inject_oom(after=0), pytest.raises(torch.OutOfMemoryError) as injected:
        empty(4)
    assert MESSAGE.match(str(real.value)), str(real.value)
    assert MESSAGE.match(str(injected.value)), str(injected.value)
    assert type(injected.value) is type(real.value)


def test_catch_free_and_retry_with_a_smaller_batch():
    w = torch.randn(64, 8, device="vdev")

    def step(batch: int) -> float:
        x = torch.ones(batch, 64, device="vdev")  # allocation 1
        y = x @ w  # allocation 2
        return y.sum().item()  # allocation 3 (the sum's output)

    batches = []
    batch = 32
    with inject_oom(after=1) as oom:  # the first step's matmul output fails
        while True:
            batches.append(batch)
            try:
                result = step(batch)
                break
            except torch.OutOfMemoryError:
                batch //= 2
                torch.vdev.empty_cache()
    assert oom.fired and batches == [32, 16]
    assert result == pytest.approx(16 * w.sum(0).sum().item(), rel=1e-5)


def _segments(snapshot: list[dict]) -> list[tuple]:
    return [
        (
            s["device"],
            s["address"],
            s["total_size"],
            s["allocated_size"],
            s["active_size"],
            tuple((b["size"], b["state"]) for b in s["blocks"]),
        )
        for s in snapshot
    ]


def test_statistics_snapshot_and_history_stay_consistent():
    held = [empty(300), empty(1 << 20)]
    free_later = empty(5000)
    del free_later  # a cached block
    # Nothing else may free meanwhile: tensors of earlier tests left in reference cycles are
    # collected now, not between the two looks; fences of deferred frees complete.
    gc.collect()
    gc.disable()
    torch.vdev.synchronize()
    torch.vdev.memory._record_memory_history(max_entries=1000)
    try:
        stats = torch.vdev.memory_stats()
        segments = _segments(torch.vdev.memory_snapshot())
        with inject_oom(after=0), pytest.raises(torch.OutOfMemoryError):
            empty(5000)  # would have been a cache hit
        after = torch.vdev.memory_stats()
        segments_after = _segments(torch.vdev.memory_snapshot())
        allocated, reserved = torch.vdev.memory_allocated(), torch.vdev.memory_reserved()
        trace = torch.vdev.memory._snapshot()["device_traces"][0]
    finally:
        torch.vdev.memory._record_memory_history(enabled=None)
        gc.enable()
    # Exactly the failure is counted: nothing allocated, released, retried or synchronized.
    assert {k: v for k, v in after.items() if v != stats[k]} == {"num_ooms": stats["num_ooms"] + 1}
    assert segments_after == segments
    assert allocated == stats["allocated_bytes.all.current"]
    assert reserved == stats["reserved_bytes.all.current"]
    # As a real out-of-memory error: recorded in the history (observers: in a fresh interpreter,
    # test_environment_variable_in_a_fresh_interpreter, as they cannot be detached).
    assert [e["size"] for e in trace if e["action"] == "oom"] == [20000]
    # The allocator goes on.
    again = empty(5000)
    assert torch.vdev.memory_stats()["num_alloc_retries"] == stats["num_alloc_retries"]
    del again, held


def test_scopes_nest_and_restore_what_they_replaced():
    with inject_oom(after=2) as outer:
        empty(8)  # outer: 1 passed, 1 to pass
        with inject_oom(after=0) as inner:  # the outer countdown is suspended meanwhile
            with pytest.raises(torch.OutOfMemoryError):
                empty(8)
            empty(8)
        assert inner.fired and not outer.fired
        empty(8)  # outer's second
        with pytest.raises(torch.OutOfMemoryError):
            empty(8)
    assert outer.fired
    # A scope that does not fire is withdrawn at its exit, and says so.
    with inject_oom(after=50) as unused:
        empty(8)
    assert not unused.fired
    _ = [empty(8) for _ in range(60)]
    # An error raised inside the scope goes through, and the scope is still closed.
    with pytest.raises(KeyError), inject_oom(after=0):
        raise KeyError("x")
    empty(8)


def test_allocations_on_other_threads_count():
    import threading

    errors = []

    def allocate():
        try:
            empty(16)
        except torch.OutOfMemoryError as e:
            errors.append(e)

    with inject_oom(after=0) as oom:
        t = threading.Thread(target=allocate)
        t.start()
        t.join()
    assert oom.fired and len(errors) == 1


@pytest.mark.parametrize(
    "after,error,needle",
    [
        (-1, ValueError, "after=-1 is not valid"),
        (2**63, ValueError, f"after={2**63} is not valid"),
        (1.5, TypeError, "must be an int, got float"),
        (True, TypeError, "must be an int, got bool"),
        ("3", TypeError, "must be an int, got str"),
    ],
)
def test_bad_counts_are_refused_naming_the_value_and_range(after, error, needle):
    with pytest.raises(error, match=re.escape(needle)) as info:
        inject_oom(after=after)
    if error is ValueError:
        assert f"an integer in 0..{2**63 - 1}" in str(info.value)


def test_environment_variable_in_a_fresh_interpreter():
    r = run_python(
        """
        import torch
        seen = []
        torch.vdev.memory._attach_out_of_memory_observer(lambda *args: seen.append(args[:2]))
        def alloc():
            try:
                torch.empty(4, device="vdev")
                return "ok"
            except torch.OutOfMemoryError as e:
                return "OOM" if str(e).startswith("vdev out of memory") else repr(e)
        print(*[alloc() for _ in range(4)])
        with torch.vdev.memory.inject_oom(after=0) as oom:
            print(alloc())
        print(oom.fired, torch.vdev.memory_stats()["num_ooms"], seen)
        """,
        env={"VDEV_OOM_AFTER": "2"},
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:3] == ["ok ok OOM ok", "OOM", "True 2 [(0, 16), (0, 16)]"], r.stdout

    # Set before the first allocation, a scope is what counts; the variable resumes after it.
    r = run_python(
        """
        import torch
        with torch.vdev.memory.inject_oom(after=0):
            try:
                torch.empty(4, device="vdev")
            except torch.OutOfMemoryError:
                print("scope")
        for i in range(3):
            try:
                torch.empty(4, device="vdev")
            except torch.OutOfMemoryError:
                print("variable", i)
        """,
        env={"VDEV_OOM_AFTER": "1"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["scope", "variable 1"]


def test_an_empty_variable_injects_nothing():
    r = run_python(
        "import torch\n_ = [torch.empty(4, device='vdev') for _ in range(5)]\nprint('ok')\n",
        env={"VDEV_OOM_AFTER": ""},
    )
    assert r.returncode == 0 and r.stdout.split() == ["ok"], r.stderr


@pytest.mark.parametrize("value", ["-1", "abc", "1.5", "99999999999999999999"])
def test_a_malformed_variable_keeps_import_safe_and_fails_clearly_on_use(value):
    r = run_python(
        """
        import warnings
        import torch
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert torch.vdev.device_count() == 0
        for use in (
            lambda: torch.zeros(1, device="vdev"),
            lambda: torch.vdev.memory.inject_oom(after=1).__enter__(),
        ):
            try:
                use()
            except RuntimeError as e:
                print("ERR", e)
            else:
                raise SystemExit("no error")
        """,
        env={"VDEV_OOM_AFTER": value},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    errors = [line for line in r.stdout.splitlines() if line.startswith("ERR")]
    assert len(errors) == 2, r.stdout
    for line in errors:
        assert f"VDEV_OOM_AFTER='{value}'" in line and f"an integer in 0..{2**63 - 1}" in line, line


@pytest.mark.parametrize(
    "text,expected", [("0", 0), (" 7 ", 7), ("9223372036854775807", 2**63 - 1)]
)
def test_parse_oom_after_accepts(text, expected):
    from torch_vdev import _testing as rt

    assert rt.parse_oom_after(text) == expected
