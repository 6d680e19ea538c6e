"""Memory history, snapshots and profiler memory events (issue 33, items 3 and 4): what
torch.cuda.memory's _record_memory_history / _snapshot / _dump_snapshot / memory_snapshot and
profile(profile_memory=True) give on CUDA, read back and checked against the allocator's
statistics, PyTorch's memory visualizer (torch.cuda._memory_viz) and the way PyTorch's memory
viewer (torch/utils/viz/MemoryViz.js) replays a trace."""

import gc
import gzip
import json
import os
import pickle
import pickletools
import subprocess
import sys
import threading

import pytest
import torch
from asyncutil import gated, wait_until_blocked
from torch.profiler import ProfilerActivity, profile, record_function

from child_process import run_python

MiB = 1 << 20
memory = torch.vdev.memory

SNAPSHOT_KEYS = {"segments", "device_traces", "allocator_settings", "external_annotations"}
SEGMENT_KEYS = {
    "device",
    "address",
    "total_size",
    "allocated_size",
    "active_size",
    "requested_size",
    "stream",
    "segment_type",
    "segment_pool_id",
    "is_expandable",
    "frames",
    "blocks",
}
BLOCK_KEYS = {"address", "size", "requested_size", "state", "frames"}
ENTRY_KEYS = {"action", "size", "stream", "time_us", "compile_context", "user_metadata"}
ACTIONS = {
    "alloc",
    "free_requested",
    "free_completed",
    "segment_alloc",
    "segment_free",
    "segment_map",
    "segment_unmap",
    "snapshot",
    "oom",
}
SETTINGS_KEYS = {
    "PYTORCH_CUDA_ALLOC_CONF",
    "max_split_size",
    "garbage_collection_threshold",
    "expandable_segments",
    "pinned_num_register_threads",
    "release_lock_on_cudamalloc",
    "pinned_use_cuda_host_register",
    "roundup_power2_divisions",
    "graph_capture_record_stream_reuse",
}


@pytest.fixture(autouse=True)
def _history_off_after():
    yield
    memory._record_memory_history(None)


def settle():
    """No tensor of an earlier test is freed in the middle of a comparison."""
    gc.collect()
    torch.vdev.synchronize()


def entries(snapshot, device=0, action=None, addr=None):
    out = snapshot["device_traces"][device]
    if action is not None:
        out = [e for e in out if e["action"] == action]
    if addr is not None:
        out = [e for e in out if e.get("addr") == addr]
    return out


def block_entries(snapshot, addr, device=0):
    """The alloc / free entries of the block at `addr` (a segment's entries may share it)."""
    return [
        e
        for e in entries(snapshot, device, addr=addr)
        if e["action"] in ("alloc", "free_requested", "free_completed")
    ]


def block_at(snapshot, addr):
    for seg in snapshot["segments"]:
        for b in seg["blocks"]:
            if b["address"] == addr:
                return b
    return None


def segment_of(snapshot, addr):
    (seg,) = [
        s for s in snapshot["segments"] if s["address"] <= addr < s["address"] + s["total_size"]
    ]
    return seg


def frame_names(frames):
    return [f["name"] for f in frames]


def check_structure(snapshot):
    """CUDA's schema (torch/csrc/cuda/memory_snapshot.cpp): keys, types, and the relations
    torch.cuda._memory_viz relies on (blocks tile their segment; segment sums)."""
    assert set(snapshot) == SNAPSHOT_KEYS
    assert set(snapshot["allocator_settings"]) == SETTINGS_KEYS
    assert len(snapshot["device_traces"]) == torch.vdev.device_count()
    for seg in snapshot["segments"]:
        assert set(seg) == SEGMENT_KEYS
        assert seg["segment_type"] in ("small", "large")
        assert isinstance(seg["segment_pool_id"], tuple) and len(seg["segment_pool_id"]) == 2
        assert seg["is_expandable"] is False
        assert all(isinstance(seg[k], int) for k in ("address", "total_size", "stream", "device"))
        address = seg["address"]
        for b in seg["blocks"]:
            assert set(b) == BLOCK_KEYS
            assert b["address"] == address  # blocks tile the segment in address order
            assert b["state"] in ("active_allocated", "active_pending_free", "inactive")
            assert 0 <= b["requested_size"] <= b["size"]
            for f in b["frames"]:
                assert set(f) == {"filename", "line", "name"}
            address += b["size"]
        assert address == seg["address"] + seg["total_size"]
        blocks = seg["blocks"]
        allocated = [b for b in blocks if b["state"] == "active_allocated"]
        active = [b for b in blocks if b["state"] != "inactive"]
        assert seg["allocated_size"] == sum(b["size"] for b in allocated)
        assert seg["active_size"] == sum(b["size"] for b in active)
        assert seg["requested_size"] == sum(b["requested_size"] for b in active)
    for trace in snapshot["device_traces"]:
        for e in trace:
            assert e["action"] in ACTIONS
            assert ENTRY_KEYS <= set(e) <= ENTRY_KEYS | {"addr", "device_free", "frames"}
            assert ("device_free" in e) == (e["action"] == "oom")
            assert ("addr" in e) == (e["action"] != "oom")
        assert all(isinstance(e["time_us"], int) and e["time_us"] > 0 for e in trace)


def check_sizes_agree_with_statistics(snapshot):
    for device in range(torch.vdev.device_count()):
        segs = [s for s in snapshot["segments"] if s["device"] == device]
        stats = torch.vdev.memory_stats(device)
        blocks = [b for s in segs for b in s["blocks"]]
        assert sum(s["total_size"] for s in segs) == torch.vdev.memory_reserved(device)
        assert sum(
            b["size"] for b in blocks if b["state"] == "active_allocated"
        ) == torch.vdev.memory_allocated(device)
        assert sum(b["size"] for b in blocks if b["state"] != "inactive") == stats.get(
            "active_bytes.all.current", 0
        )
        assert len(segs) == stats.get("segment.all.current", 0)


def replay_like_memory_viz(snapshot, device=0):
    """Replays a device's trace the way PyTorch's memory viewer does (torch/utils/viz/
    MemoryViz.js) and fails where it would break or draw wrong numbers.

    Its "Allocator State History" view rebuilds the allocator at every entry by walking the trace
    backwards from the snapshot's segments and active blocks (simulate_memory): an elided
    free_requested+free_completed pair and a free_completed put a block back, an alloc removes
    it, a free_requested needs its block, segment_free puts a segment back, segment_alloc removes
    it; every block must then lie in a segment. Its "Active Memory Timeline" (process_alloc_data)
    pairs each alloc with its free; what stays at the end must be the live allocations."""
    trace = []
    for e in snapshot["device_traces"][device]:
        prev = trace[-1] if trace else None
        if (
            e["action"] == "free_completed"
            and prev is not None
            and prev["action"] == "free_requested"
            and prev["addr"] == e["addr"]
        ):
            trace[-1] = dict(prev, action="free")
            continue
        trace.append(e)
    segments = {}
    blocks = {}
    pending_allocated_in_trace = 0
    allocated_addrs = {e["addr"] for e in trace if e["action"] == "alloc"}
    for seg in snapshot["segments"]:
        if seg["device"] != device:
            continue
        segments[seg["address"]] = seg["total_size"]
        for b in seg["blocks"]:
            if b["state"] != "inactive":
                blocks[b["address"]] = b["requested_size"]
            if b["state"] == "active_pending_free" and b["address"] in allocated_addrs:
                pending_allocated_in_trace += b["requested_size"]

    def check_blocks_in_segments():
        for addr, size in blocks.items():
            assert any(s <= addr and addr + size <= s + n for s, n in segments.items()), (
                f"block {addr:#x} lies in no segment"
            )

    check_blocks_in_segments()
    for e in reversed(trace):
        action = e["action"]
        if action in ("free", "free_completed"):
            assert e["addr"] not in blocks, f"{action} of a live block {e['addr']:#x}"
            blocks[e["addr"]] = e["size"]
        elif action == "free_requested":
            assert e["addr"] in blocks, f"free_requested of an unknown block {e['addr']:#x}"
        elif action == "alloc":
            assert blocks.pop(e["addr"], None) is not None, f"alloc of no block {e['addr']:#x}"
        elif action == "segment_free":
            assert e["addr"] not in segments
            segments[e["addr"]] = e["size"]
        elif action == "segment_alloc":
            assert segments.pop(e["addr"], None) == e["size"], f"no segment {e['addr']:#x}"
        check_blocks_in_segments()

    # The timeline: allocs add their size, frees remove it, frees of earlier blocks start out
    # counted; the live allocations of the snapshot not allocated in the trace are counted too.
    live = {}
    initially = 0
    for e in trace:
        if e["action"] == "alloc":
            live[e["addr"]] = e["size"]
        elif e["action"] in ("free", "free_completed"):
            if e["addr"] in live:
                del live[e["addr"]]
            else:
                initially += e["size"]  # counted from the start, removed here
    for seg in snapshot["segments"]:
        if seg["device"] != device:
            continue
        for b in seg["blocks"]:
            if b["state"] == "active_allocated" and b["address"] not in live:
                initially += b["requested_size"]
                live[b["address"]] = b["requested_size"]
    drawn = sum(live.values())
    expected = sum(
        b["requested_size"]
        for seg in snapshot["segments"]
        if seg["device"] == device
        for b in seg["blocks"]
        if b["state"] == "active_allocated"
    )
    assert drawn == expected + pending_allocated_in_trace


# ---- the snapshot ---------------------------------------------------------------------------


def test_snapshot_has_cudas_schema_and_agrees_with_the_statistics():
    settle()
    memory._record_memory_history(stacks="python")
    side = torch.vdev.Stream()
    small = torch.ones(100, device="vdev")
    large = torch.empty(3 * MiB, dtype=torch.uint8, device="vdev")
    with torch.vdev.stream(side):
        other = torch.zeros(1000, device="vdev")
    on_1 = torch.ones(10, device="vdev:1")
    freed = torch.empty(5000, device="vdev")
    del freed
    settle()
    snapshot = memory._snapshot()
    check_structure(snapshot)
    check_sizes_agree_with_statistics(snapshot)
    for device in (0, 1):
        replay_like_memory_viz(snapshot, device)

    b = block_at(snapshot, small.data_ptr())
    assert b["state"] == "active_allocated" and b["size"] == 512 and b["requested_size"] == 400
    assert "test_snapshot_has_cudas_schema_and_agrees_with_the_statistics" in frame_names(
        b["frames"]
    )
    seg = segment_of(snapshot, large.data_ptr())
    assert seg["segment_type"] == "large" and seg["segment_pool_id"] == (0, 0)
    assert seg["stream"] == 0  # the default stream, as CUDA's 0
    assert segment_of(snapshot, small.data_ptr())["segment_type"] == "small"
    assert segment_of(snapshot, other.data_ptr())["stream"] == side.stream_id != 0
    assert any(s["device"] == 1 for s in snapshot["segments"])
    alloc = entries(snapshot, 0, "alloc", small.data_ptr())[-1]
    assert alloc["size"] == 400 and alloc["stream"] == 0 and alloc["compile_context"] == "N/A"
    assert entries(snapshot, 1, "alloc", on_1.data_ptr())
    assert entries(snapshot)[-1]["action"] == "snapshot"
    assert memory.memory_snapshot() == memory._snapshot()["segments"]
    assert torch.vdev.memory_snapshot is memory.memory_snapshot


def test_a_free_while_another_stream_uses_the_block_completes_after_that_work():
    settle()
    memory._record_memory_history(context="all", stacks="python")
    side = torch.vdev.Stream()
    x = torch.ones(2048, device="vdev")
    addr = x.data_ptr()
    torch.vdev.current_stream().synchronize()  # x is written before the side stream reads it
    with gated(side) as gate:
        wait_until_blocked(gate)
        with torch.vdev.stream(side):
            y = x * 2  # queued behind the gate
        x.record_stream(side)
        del x
        torch.vdev.memory_stats()  # looks at the deferred frees: this one must stay
        held = memory._snapshot()
        assert [e["action"] for e in block_entries(held, addr)] == ["alloc", "free_requested"]
        assert block_at(held, addr)["state"] == "active_pending_free"
        assert block_at(held, addr)["requested_size"] == 2048 * 4
        check_sizes_agree_with_statistics(held)
        replay_like_memory_viz(held)
    side.synchronize()
    done = memory._snapshot()
    mine = block_entries(done, addr)
    assert [e["action"] for e in mine[:3]] == ["alloc", "free_requested", "free_completed"]
    assert mine[2]["time_us"] >= mine[1]["time_us"]
    assert mine[2]["size"] == 2048 * 4
    assert "test_a_free_while" in " ".join(frame_names(mine[1]["frames"]))
    assert block_at(done, addr) is None or block_at(done, addr)["state"] == "inactive"
    check_sizes_agree_with_statistics(done)
    replay_like_memory_viz(done)
    assert y.sum().item() == 2 * 2048


def test_segments_given_back_are_recorded_and_the_viewer_replays_a_long_trace():
    settle()
    memory._record_memory_history(stacks="python", clear_history=True)
    side = torch.vdev.Stream()
    keep = []
    for i in range(60):
        t = torch.empty((i * 7919) % (3 * MiB) + 1, dtype=torch.uint8, device="vdev")
        if i % 3 == 0:
            keep.append(t)
        if i % 7 == 0:
            with torch.vdev.stream(side):
                u = torch.empty(1000 + i, device="vdev")
            del u
        if i % 20 == 19:
            keep = keep[::2]
            torch.vdev.empty_cache()
    snapshot = memory._snapshot()
    assert entries(snapshot, action="segment_free")
    check_structure(snapshot)
    check_sizes_agree_with_statistics(snapshot)
    replay_like_memory_viz(snapshot)


def test_graph_private_pools_appear_as_segments_with_their_pool_id():
    settle()
    memory._record_memory_history(stacks="python")
    side = torch.vdev.Stream()
    x = torch.ones(1 << 16, device="vdev")
    g = torch.vdev.VdevGraph()
    with torch.vdev.graph(g, stream=side):
        y = x * 2 + 1
    pool = g.pool()
    assert pool != (0, 0)
    snapshot = memory._snapshot()
    pooled = [s for s in snapshot["segments"] if s["segment_pool_id"] == pool]
    assert pooled and all(s["stream"] == side.stream_id for s in pooled)
    assert any(b["address"] == y.data_ptr() for s in pooled for b in s["blocks"])
    assert memory.memory_snapshot(mempool_id=pool) == pooled
    assert memory.memory_snapshot(mempool_id=list(pool)) == pooled
    check_sizes_agree_with_statistics(snapshot)
    g.replay()
    assert y[0].item() == 3.0


# ---- recording ------------------------------------------------------------------------------


def test_history_off_records_nothing_and_stopping_drops_the_entries():
    settle()
    memory._record_memory_history(stacks="python")
    torch.ones(10, device="vdev")
    assert entries(memory._snapshot())
    memory._record_memory_history(None)
    x = torch.ones(1000, device="vdev")
    y = torch.empty(4 * MiB, dtype=torch.uint8, device="vdev")
    del y
    torch.vdev.empty_cache()
    snapshot = memory._snapshot()
    assert all(trace == [] for trace in snapshot["device_traces"])
    assert block_at(snapshot, x.data_ptr())["frames"] == []
    check_sizes_agree_with_statistics(snapshot)


def test_state_keeps_stacks_of_live_blocks_only():
    memory._record_memory_history(enabled="state", stacks="python")
    x = torch.ones(10, device="vdev")
    torch.ones(20, device="vdev")
    snapshot = memory._snapshot()
    assert len(entries(snapshot)) == 1  # no history beyond the newest entry, as on CUDA
    assert frame_names(block_at(snapshot, x.data_ptr())["frames"])


@pytest.mark.parametrize("context", [None, "state", "alloc", "all"])
def test_context_chooses_which_stacks_are_kept(context):
    memory._record_memory_history(context=context, stacks="python", clear_history=True)
    x = torch.ones(10, device="vdev")
    z = torch.ones(10, device="vdev")
    del z
    snapshot = memory._snapshot()
    alloc = entries(snapshot, action="alloc", addr=x.data_ptr())[-1]
    freed = entries(snapshot, action="free_requested")[-1]
    assert bool(block_at(snapshot, x.data_ptr())["frames"]) == (context is not None)
    assert ("frames" in alloc) == (context in ("alloc", "all"))
    assert ("frames" in freed) == (context == "all")


def test_stacks_all_adds_cpp_frames():
    memory._record_memory_history(context="alloc", stacks="all", max_entries=10)
    x = torch.ones(10, device="vdev")
    frames = entries(memory._snapshot(), action="alloc", addr=x.data_ptr())[-1]["frames"]
    names = frame_names(frames)
    assert "test_stacks_all_adds_cpp_frames" in names
    assert any("::" in n for n in names), names  # C++ frames, e.g. at::empty


def test_max_entries_keeps_the_newest():
    memory._record_memory_history(max_entries=4, stacks="python", clear_history=True)
    tensors = [torch.empty(100 + i, device="vdev") for i in range(6)]
    trace = entries(memory._snapshot())
    assert len(trace) == 4
    assert trace[-1]["action"] == "snapshot"
    assert [e["addr"] for e in trace[:3]] == [t.data_ptr() for t in tensors[3:]]


def test_max_entries_zero_keeps_one_entry_as_on_cuda():
    """CUDA clamps max_entries to 1 (c10's RingBuffer::setMaxEntries: std::max(1, size)) and
    records: the newest action stays, here the snapshot's own entry."""
    memory._record_memory_history(max_entries=0, stacks="python", clear_history=True)
    x = torch.empty(100, device="vdev")
    snapshot = memory._snapshot()
    assert [e["action"] for e in entries(snapshot)] == ["snapshot"]
    blocks = [b for s in snapshot["segments"] for b in s["blocks"] if b["address"] == x.data_ptr()]
    assert blocks and blocks[0]["state"] == "active_allocated" and blocks[0]["frames"]
    # The older form's int64_t max_entries becomes CUDA's size_t: a negative one keeps every entry.
    memory._record_memory_history(True, trace_alloc_max_entries=-1, clear_history=True)
    tensors = [torch.empty(100 + i, device="vdev") for i in range(5)]
    assert len(entries(memory._snapshot(), action="alloc")) == len(tensors)
    memory._record_memory_history(True, trace_alloc_max_entries=0, clear_history=True)
    tensors = [torch.empty(100 + i, device="vdev") for i in range(5)]
    assert [e["action"] for e in entries(memory._snapshot())] == ["snapshot"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_entries": -1}, "max_entries=-1 is out of range: expected an integer in 0..2**64-1"),
        ({"max_entries": 2**64}, "is out of range: expected an integer in 0..2**64-1"),
        ({"max_entries": 2.5}, "max_entries=2.5 must be an integer in 0..2**64-1"),
        ({"max_entries": "4"}, "max_entries='4' must be an integer in 0..2**64-1"),
        ({"enabled": True, "trace_alloc_max_entries": 2**63}, "in -2**63..2**63-1"),
    ],
)
def test_max_entries_cuda_cannot_convert_is_a_type_error(kwargs, message):
    """CUDA's binding takes a size_t (an int64_t in the older form): pybind11 raises TypeError
    for any other value; vdev says which and the range."""
    message = message.replace("2**64-1", str(2**64 - 1)).replace("-2**63", str(-(2**63)))
    message = message.replace("2**63-1", str(2**63 - 1))
    with pytest.raises(TypeError) as info:
        memory._record_memory_history(**kwargs)
    assert message in str(info.value)


def test_skip_actions_and_user_metadata():
    memory._record_memory_history(
        stacks="python", skip_actions=["free_requested", "free_completed"], clear_history=True
    )
    memory._set_memory_metadata("step 3")
    try:
        assert memory._get_memory_metadata() == "step 3"
        torch.ones(10, device="vdev")
    finally:
        memory._set_memory_metadata("")
    trace = entries(memory._snapshot())
    assert {e["action"] for e in trace} <= {"alloc", "segment_alloc", "snapshot"}
    assert [e for e in trace if e["action"] == "alloc"][-1]["user_metadata"] == "step 3"


def test_record_function_annotations_are_recorded():
    memory._record_memory_history(stacks="python", clear_history=True)
    with record_function("## phase ##"):
        torch.ones(10, device="vdev")
    annotations = memory._snapshot()["external_annotations"]
    mine = [a for a in annotations if a["name"] == "## phase ##"]
    assert [a["stage"] for a in mine] == ["START", "END"]
    assert all(a["device"] == 0 and isinstance(a["time_us"], int) for a in mine)


@pytest.mark.parametrize("global_record_annotations", [False, True])
def test_annotations_of_other_threads_need_global_record_annotations(global_record_annotations):
    memory._record_memory_history(
        stacks="python", clear_history=True, global_record_annotations=global_record_annotations
    )

    def annotate():
        with record_function("## other thread ##"):
            pass

    t = threading.Thread(target=annotate)
    t.start()
    t.join()
    names = {a["name"] for a in memory._snapshot()["external_annotations"]}
    assert ("## other thread ##" in names) == global_record_annotations


def test_compile_context_names_the_compiled_region():
    memory._record_memory_history(stacks="python", compile_context=True, clear_history=True)

    def f(x):
        return (x * 2).sin() + 1

    x = torch.ones(1000, device="vdev")
    y = torch.compile(f)(x)
    contexts = {e["compile_context"] for e in entries(memory._snapshot(), action="alloc")}
    assert any(c.startswith("Torch-Compiled Region") for c in contexts), contexts
    assert "N/A" in contexts  # x, allocated outside it
    torch.testing.assert_close(y.cpu(), f(x.cpu()))


def test_the_legacy_boolean_form():
    memory._record_memory_history(True, trace_alloc_max_entries=10, trace_alloc_record_context=True)
    x = torch.ones(10, device="vdev")
    alloc = entries(memory._snapshot(), action="alloc", addr=x.data_ptr())[-1]
    assert "test_the_legacy_boolean_form" in frame_names(alloc["frames"])
    memory._record_memory_history(False)
    assert all(t == [] for t in memory._snapshot()["device_traces"])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"enabled": "yes"}, "enabled='yes' is not one of None, 'state', 'all'"),
        ({"context": "stack"}, "context='stack' is not one of None, 'state', 'alloc', 'all'"),
        ({"stacks": "cpp"}, "stacks='cpp' is not one of 'python', 'all'"),
        ({"skip_actions": ["allocate"]}, "skip_actions contains 'allocate', which is not one of"),
        ({"skip_actions": "alloc"}, "must be a list of actions"),
    ],
)
def test_unknown_values_are_refused_naming_the_valid_ones(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        memory._record_memory_history(**kwargs)


def test_a_bad_device_is_refused_and_the_signature_is_cudas():
    with pytest.raises(IndexError):
        memory._record_memory_history(device=7)
    import inspect

    ours = inspect.signature(memory._record_memory_history)
    cudas = inspect.signature(torch.cuda.memory._record_memory_history)
    # torch 2.14 added record_pinned_host_memory and record_cuda: vdev takes them with every torch.
    assert list(ours.parameters)[: len(cudas.parameters)] == list(cudas.parameters)
    assert list(ours.parameters)[len(cudas.parameters) :] in (
        [],
        ["record_pinned_host_memory", "record_cuda"],
    )
    assert list(inspect.signature(memory._snapshot).parameters) == [
        "device",
        "augment_with_fx_traces",
    ]


def test_recording_is_safe_from_many_threads():
    settle()
    memory._record_memory_history(context="all", stacks="python", max_entries=100_000)
    streams = [torch.vdev.Stream() for _ in range(3)]
    errors = []
    stop = threading.Event()

    def work(k):
        try:
            for i in range(150):
                s = streams[(i + k) % 3]
                with torch.vdev.stream(s):
                    t = torch.empty(64 * (i % 9 + 1) + k, device="vdev")
                    u = t.fill_(1.0) * 2
                t.record_stream(streams[k % 3])
                del t, u
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    def snapshots():
        while not stop.is_set():
            check_structure(memory._snapshot())

    watcher = threading.Thread(target=snapshots)
    watcher.start()
    workers = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stop.set()
    watcher.join()
    assert not errors, errors
    settle()
    snapshot = memory._snapshot()
    check_structure(snapshot)
    check_sizes_agree_with_statistics(snapshot)
    replay_like_memory_viz(snapshot)


# ---- out of memory --------------------------------------------------------------------------


def test_out_of_memory_leaves_an_entry_and_calls_the_observer_before_raising():
    r = run_python(
        """
        import torch
        memory = torch.vdev.memory
        memory._record_memory_history(stacks="python")
        seen = []

        def observer(device, alloc, device_allocated, device_free):
            seen.append((device, alloc, device_allocated, device_free, memory._snapshot()))

        def failing(device, alloc, device_allocated, device_free):
            raise RuntimeError("observer failed")

        memory._attach_out_of_memory_observer(observer)
        memory._attach_out_of_memory_observer(failing)
        try:
            memory._attach_out_of_memory_observer(3)
        except TypeError as e:
            print("TypeError", e)
        keep = torch.ones(1 << 20, device="vdev:1")
        try:
            torch.empty(5 << 20, device="vdev:1")
        except torch.OutOfMemoryError:
            print("raised", len(seen))
        device, alloc, allowed, free, snap = seen[0]
        oom = snap["device_traces"][1][-2]  # the snapshot's own entry comes last
        print(device, alloc, allowed, oom["action"], oom["size"], oom["device_free"] == free)
        print(sum(s["total_size"] for s in snap["segments"] if s["device"] == 1)
              == torch.vdev.memory_reserved(1))
        print("frames" in oom and any(f["name"] == "<module>" for f in oom["frames"]))
        print(snap["device_traces"][0] == [] or all(
            e["action"] != "oom" for e in snap["device_traces"][0]))
        """,
        env={"VDEV_DEVICE_MEMORY": "16MiB"},
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("TypeError _attach_out_of_memory_observer: expected a callable")
    assert lines[1] == "raised 1"
    assert lines[2] == f"1 {20 << 20} {16 << 20} oom {20 << 20} True"
    assert lines[3:] == ["True", "True", "True"]
    assert "observer failed" in r.stderr  # reported as unraisable; the allocation raised OOM


# ---- the memory visualizer ------------------------------------------------------------------


# The pickle opcodes MemoryViz.js's unpickler decodes.
MEMORY_VIZ_OPCODES = {
    "PROTO",
    "FRAME",
    "STOP",
    "MARK",
    "MEMOIZE",
    "BINPUT",
    "LONG_BINPUT",
    "BINGET",
    "LONG_BINGET",
    "NONE",
    "NEWTRUE",
    "NEWFALSE",
    "BININT",
    "BININT1",
    "BININT2",
    "LONG1",
    "BINFLOAT",
    "SHORT_BINUNICODE",
    "BINUNICODE",
    "EMPTY_DICT",
    "DICT",
    "SETITEM",
    "SETITEMS",
    "EMPTY_LIST",
    "LIST",
    "APPEND",
    "APPENDS",
    "EMPTY_TUPLE",
    "TUPLE",
    "TUPLE1",
    "TUPLE2",
    "TUPLE3",
}


def viz(*args, home, cwd):
    env = dict(os.environ, HOME=str(home))
    return subprocess.run(
        [sys.executable, "-m", "torch.cuda._memory_viz", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def test_memory_viz_renders_a_dumped_snapshot(tmp_path):
    settle()
    memory._record_memory_history(stacks="python", clear_history=True)
    side = torch.vdev.Stream()
    keep = [torch.empty(i * 1000 + 1, device="vdev") for i in range(1, 30)]
    with torch.vdev.stream(side):
        keep.append(torch.empty(3 * MiB, device="vdev"))
    del keep[::2]
    after = tmp_path / "after.pickle"
    memory._dump_snapshot(str(after))
    data = after.read_bytes()
    assert pickle.loads(data)["device_traces"][0]
    # The viewer at pytorch.org/memory_viz decodes the file with its own unpickler
    # (MemoryViz.js: unpickle), which knows these opcodes and protocols 2 to 4 only.
    opcodes = {op.name for op, _, _ in pickletools.genops(data)}
    assert opcodes <= MEMORY_VIZ_OPCODES, opcodes - MEMORY_VIZ_OPCODES
    assert data[:2] in (b"\x80\x02", b"\x80\x03", b"\x80\x04")
    # `segments`, `memory` and `compare` pipe their flame graph lines through flamegraph.pl,
    # which _memory_viz downloads into ~/.cache; a stand-in that echoes the lines keeps the
    # test offline while everything _memory_viz reads from the snapshot is still exercised.
    cache = tmp_path / "home" / ".cache"
    cache.mkdir(parents=True)
    (cache / "flamegraph.pl").write_text("#!/bin/sh\ncat\n")
    (cache / "flamegraph.pl").chmod(0o755)
    home = tmp_path / "home"
    for command in ("stats", "trace"):
        r = viz(command, after, home=home, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip()
    r = viz("stats", after, home=home, cwd=tmp_path)
    assert f"segments: {len(memory._snapshot()['segments'])}" in r.stdout
    for command, extra in [
        ("segments", []),
        ("memory", []),
        ("trace_plot", []),
        ("trace_plot", ["-s"]),
        ("segment_plot", []),
    ]:
        out = tmp_path / f"{command}{''.join(extra)}.out"
        r = viz(command, after, *extra, "-o", out, home=home, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert out.stat().st_size > 0
    # (`compare` is left out: in torch 2.13 it iterates a snapshot's keys as segments and fails
    # on CUDA's snapshots too.)
    assert "stream_" in (tmp_path / "segments.out").read_text()
    assert "test_memory_viz_renders_a_dumped_snapshot" in (tmp_path / "memory.out").read_text()
    html = (tmp_path / "trace_plot.out").read_text()
    assert "MemoryViz.js" in html and "snapshot.pickle" in html


# ---- the profiler ---------------------------------------------------------------------------


def test_profile_memory_shows_device_memory_per_operator():
    x = torch.ones(1000, device="vdev")
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], profile_memory=True
    ) as prof:
        y = x * 2  # 4000 bytes: a 4096-byte block
        z = torch.empty(MiB, dtype=torch.uint8, device="vdev")
        del z
    events = {e.key: e for e in prof.key_averages()}
    # Its output, allocated by the operator itself, as CUDA's structured kernels allocate theirs
    # (not by an empty_strided child). The first call of a signature makes its launch plan, whose
    # meta and stand-in tensors may show as empty_strided, holding no device memory.
    assert events["aten::mul"].self_device_memory_usage == 4096
    strided = events.get("aten::empty_strided")
    assert strided is None or strided.device_memory_usage == 0
    assert events["aten::empty"].self_device_memory_usage == MiB
    assert events["[memory]"].device_memory_usage == -MiB  # z's free, outside any operator
    table = prof.key_averages().table(sort_by="self_device_memory_usage", row_limit=5)
    assert "VDEV Mem" in table
    assert y.sum().item() == 2000.0


def test_export_memory_timeline_writes_files_for_vdev(tmp_path):
    settle()
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
        profile_memory=True,
        record_shapes=True,
        with_stack=True,
    ) as prof:
        x = torch.randn(256, 256, device="vdev")
        y = (x @ x).relu()
        del x
    assert prof.use_device == "vdev"
    for path in ("timeline.json", "timeline.json.gz", "timeline.raw.json.gz"):
        with pytest.warns(FutureWarning):
            prof.export_memory_timeline(str(tmp_path / path))  # the device: "vdev:0"
        assert (tmp_path / path).stat().st_size > 0
    times, sizes = json.loads((tmp_path / "timeline.json").read_text())
    assert len(times) == len(sizes) > 0
    assert max(sum(s) for s in sizes) >= 2 * 256 * 256 * 4
    with gzip.open(tmp_path / "timeline.raw.json.gz", "rt") as f:
        assert json.load(f)
    assert y.shape == (256, 256)


def test_record_cuda_false_leaves_the_recording_and_pinned_history_warns():
    memory._record_memory_history("all")
    try:
        memory._record_memory_history(None, record_cuda=False)  # left as it is: still recording
        torch.empty(4, device="vdev")
        assert memory._snapshot()["device_traces"][0], "recording was stopped"
        with pytest.warns(UserWarning, match="pinned host memory"):
            memory._record_memory_history("all", record_pinned_host_memory=True)
    finally:
        memory._record_memory_history(None)
