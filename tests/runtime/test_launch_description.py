"""One description of queued work (issue 53, cpp/backend/common/launch.h): every path that queues
work (eager operator, express lane, copy, fill, collective, compiled kernel, graph replay) builds
one Launch, and the profiler's record, the thread policy's limits and the sanitizer's check all
come from it; host runs (an operator run on the host, a layout's host run) are described the same
way. A recording launch observer (torch_vdev._testing) sees each description next to the sanitizer,
while torch.profiler records the same work.

For each path: the recorded launch names the tensors the work reads and writes; the profiler's
device activity carries the launch's name (a memcpy or memset its bytes); the thread policy's
limits are those of the launch's size hint; and the stream sanitizer, observing the same launch,
reports an unordered access of another stream to the written tensor."""

import json

import pytest
import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile
from torch.vdev.sanitizer import StreamRaceError

from torch_vdev import _testing

DEV = "vdev"
KERNEL, MEMCPY_HTOD, MEMSET, COLLECTIVE, GRAPH_REPLAY = 1, 2, 5, 6, 7
READ, WRITE, READ_WRITE = 0, 1, 2


@pytest.fixture
def observed(tmp_path):
    """Runs a path under the recorder, the stream sanitizer and torch.profiler; gives back the
    recorded launches and the profiler's device spans."""
    seen = {}

    def run(path):
        torch.vdev.synchronize()
        with torch.vdev.sanitizer.sanitize("streams"):
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
                _testing.start_recording_launches()
                try:
                    written = path()
                finally:
                    seen["launches"] = _testing.stop_recording_launches()
                # The sanitizer saw the same launches: another stream's unordered read of what
                # the work wrote is a race.
                side = torch.vdev.Stream()
                with torch.vdev.stream(side), pytest.raises(StreamRaceError):
                    written.sum()
                torch.vdev.synchronize()
            torch.vdev.sanitizer.clear_findings()
        trace = tmp_path / "trace.json"
        prof.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text())["traceEvents"]
        seen["spans"] = [
            e for e in events if e.get("ph") == "X" and e.get("cat") in DEVICE_CATEGORIES
        ]
        return seen["launches"], seen["spans"]

    return run


DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}


def on_track(span, name):
    """The profiler's device activity of a launch named `name` (a kernel's is named
    vdev_kernel<name>, a collective's vccl:name)."""
    return span["name"] in (name, f"vdev_kernel<{name}>", f"vccl:{name}")


def launch_named(launches, name):
    found = [r for r in launches if not r["host_run"] and r["name"] == name]
    assert found, f"no launch named {name!r} among {[r['name'] for r in launches]}"
    return found[-1]


def writes(record, tensor):
    return any(
        ptr == tensor.data_ptr() and access in (WRITE, READ_WRITE)
        for ptr, _, access in record["uses"]
    )


def reads(record, tensor):
    return any(
        ptr == tensor.data_ptr() and access in (READ, READ_WRITE)
        for ptr, _, access in record["uses"]
    )


def check_policy(record):
    assert record["threads"] == _testing.policy_threads(
        record["kind"], record["bytes"], record["elements_hint"]
    )


def check_kernel(launches, spans, name, written, read=None, elements=None):
    record = launch_named(launches, name)
    assert record["kind"] == KERNEL
    assert writes(record, written)
    if read is not None:
        assert reads(record, read)
    if elements is not None:
        assert record["elements_hint"] == elements
    check_policy(record)
    assert any(on_track(s, name) for s in spans), [s["name"] for s in spans]
    return record


def test_an_eager_operator(observed):
    x = torch.arange(6000, dtype=torch.float32, device=DEV)

    def path():
        path.out = torch.cumsum(x, 0)
        return path.out

    launches, spans = observed(path)
    check_kernel(launches, spans, "aten::cumsum", path.out, read=x, elements=6000)


def test_the_express_lane_stays_on_under_the_sanitizer(observed):
    x = torch.ones(5000, device=DEV)
    y = torch.ones(5000, device=DEV)

    def path():
        x + y  # the lane's table learns the signature
        before = _testing.express_calls()
        path.out = x + y
        path.lane = _testing.express_calls() - before
        return path.out

    launches, spans = observed(path)
    assert path.lane == 1  # the sanitized program runs the path it checks
    check_kernel(launches, spans, "aten::add", path.out, read=x, elements=5000)


def test_a_copy(observed):
    host = torch.arange(4096, dtype=torch.float32).pin_memory()
    dev = torch.empty(4096, device=DEV)

    def path():
        dev.copy_(host, non_blocking=True)
        return dev

    launches, spans = observed(path)
    record = launch_named(launches, "copy_")
    assert record["operation"] == "aten::copy_"
    assert record["kind"] == MEMCPY_HTOD and record["bytes"] == 4096 * 4
    assert writes(record, dev) and reads(record, host)
    (memcpy,) = [s for s in spans if s["name"] == "Memcpy HtoD (Pinned -> Device)"]
    assert memcpy["args"]["bytes"] == record["bytes"]


def test_a_fill(observed):
    t = torch.empty(3000, device=DEV)

    def path():
        t.fill_(2.0)
        return t

    launches, spans = observed(path)
    record = launch_named(launches, "aten::fill_")
    assert record["kind"] == MEMSET and record["bytes"] == 3000 * 4
    assert writes(record, t)
    check_policy(record)
    (memset,) = [s for s in spans if s["name"] == "Memset (Device)"]
    assert memset["args"]["bytes"] == record["bytes"]


def test_a_collective(observed, tmp_path):
    dist.init_process_group(
        "vccl", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1
    )
    try:
        x = torch.ones(2000, device=DEV)

        def path():
            dist.all_reduce(x)
            return x

        launches, spans = observed(path)
    finally:
        dist.destroy_process_group()
    record = launch_named(launches, "c10d::allreduce")
    assert record["kind"] == COLLECTIVE and record["bytes"] == 2000 * 4
    assert any(p == x.data_ptr() and a == READ_WRITE for p, _, a in record["uses"])
    assert any(on_track(s, "c10d::allreduce") for s in spans), [s["name"] for s in spans]


def test_a_compiled_kernel(observed):
    compiled = torch.compile(lambda a: a * 2 + 1, fullgraph=True)
    x = torch.ones(64, device=DEV)
    compiled(x)
    torch.vdev.synchronize()

    def path():
        path.out = compiled(x)
        return path.out

    launches, spans = observed(path)
    (record,) = [r for r in launches if r["name"].startswith("cpp_fused")]
    assert record["kind"] == KERNEL and writes(record, path.out) and reads(record, x)
    check_policy(record)
    assert any(on_track(s, record["name"]) for s in spans), [s["name"] for s in spans]


def test_a_graph_replay(observed):
    static_in = torch.ones(64, device=DEV)
    out = torch.empty(64, device=DEV)
    g = torch.vdev.VdevGraph()

    def path():  # captured under the sanitizer, which keeps the capture's accesses for replays
        side = torch.vdev.Stream()
        side.wait_stream(torch.vdev.current_stream())
        with torch.vdev.graph(g, stream=side):
            out.copy_(static_in * 2)
        torch.vdev.current_stream().wait_stream(side)
        g.replay()
        return out

    launches, spans = observed(path)
    record = launch_named(launches, "graph_replay")
    assert record["kind"] == GRAPH_REPLAY and record["replays_capture"] != 0
    check_policy(record)
    # The profiler shows a replay as the operations inside it (test_profiler.py).
    assert any(on_track(s, "aten::mul") for s in spans), [s["name"] for s in spans]


def test_host_runs_are_described_once_too():
    # An operator run on the host (a sparse tensor's layout host run) and a blocking copy.
    i = torch.tensor([[0, 1, 2], [2, 0, 1]])
    s = torch.sparse_coo_tensor(i, torch.ones(3), (3, 3)).to(DEV)
    torch.vdev.synchronize()
    _testing.start_recording_launches()
    try:
        c = s.coalesce()
        back = c.values().cpu()
    finally:
        launches = _testing.stop_recording_launches()
    runs = [r for r in launches if r["host_run"]]
    assert any(r["name"] == "aten::_coalesce" and r["uses"] for r in runs), runs
    assert any(r["name"] == "aten::copy_" and reads(r, c.values()) for r in runs), runs
    assert back.tolist() == [1.0, 1.0, 1.0]
