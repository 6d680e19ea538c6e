"""Device time in key_averages() is each device activity's, credited once (issue 50, item 3): to
the operator that launched it, never also to vdev's runtime rows (vdevLaunchKernel,
vdevEventRecord, ...), which have no device time, as CUDA's cudaLaunchKernel rows have none.

torch matches a host event linked to no operator by its own id against the operators' ids
(torch/autograd/profiler.py, _parse_kineto_results): a launch from a thread the profile does
not follow, or an event recorded outside any operator, whose id equalled an operator's was
credited with that operator's kernels. vdev's launch ids and torch's operator ids both count from
1 in a process, so the profile runs in a fresh process, where the two numberings overlap for
certain: first the unlinked launches, then many operators.

The guard: over a training step with every kind of task (kernels, the three copy directions, a
copy between devices, a fill, an event record and wait with a second stream, a graph replay),
the device totals of key_averages() equal the durations of the device activities torch received,
by device rows and by operator rows."""

import json

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from child_process import run_python

CHILD = r"""
import json, threading
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

two = torch.vdev.device_count() >= 2
model = torch.nn.Sequential(
    torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)
).to("vdev")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
host_x = torch.randn(32, 64).pin_memory()
host_y = torch.randn(32, 8)  # pageable
side = torch.vdev.Stream()
g_in = torch.zeros(256, device="vdev")
graph = torch.accelerator.Graph()
with torch.vdev.stream(side), graph:
    g_in.add_(1)
    g_in.mul_(2)
probe = torch.ones(128, device="vdev")
torch.nn.functional.mse_loss(model(host_x.to("vdev")), host_y.to("vdev")).backward()  # grads
torch.vdev.synchronize()


def unfollowed():  # a thread the profile does not follow: its launches have no operator
    for _ in range(20):
        probe.add(1)


with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    t = threading.Thread(target=unfollowed)
    t.start()
    t.join()
    marker = torch.vdev.Event()
    for _ in range(20):
        marker.record()  # vdevEventRecord outside any operator
    with record_function("train_step"):
        x = host_x.to("vdev", non_blocking=True)  # HtoD, pinned
        y = host_y.to("vdev")  # HtoD, pageable
        opt.zero_grad(set_to_none=False)  # fills
        torch.zeros(64, device="vdev")  # a fill
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        w = model[0].weight.detach()
        w.clone()  # DtoD
        w.t().contiguous()  # a copy kernel
        w.half()  # a copy kernel
        if two:
            w.to("vdev:1")  # PtoP
        side.wait_stream(torch.vdev.current_stream())  # event record and wait
        with torch.vdev.stream(side):
            graph.replay()
            (w * 2).sum()
        torch.vdev.current_stream().wait_stream(side)
        back = torch.empty(8, pin_memory=True)
        back.copy_(w[0, :8], non_blocking=True)  # DtoH, pinned
        loss.detach().cpu()  # DtoH, pageable
        for _ in range(200):  # operators whose ids cover the unlinked launches'
            probe.mul_(1.0)
        torch.vdev.synchronize()
        if two:
            torch.vdev.synchronize(1)

rows = [
    {
        "key": r.key,
        "device_type": str(r.device_type),
        "user_annotation": bool(r.is_user_annotation),
        "device_time_total": r.device_time_total,
        "self_device_time_total": r.self_device_time_total,
    }
    for r in prof.key_averages()
]
activities = [
    {
        "name": e.name(),
        "us": e.duration_ns() / 1000,
        "linked": e.linked_correlation_id(),
        "annotation": bool(e.is_user_annotation()),
    }
    for e in prof.profiler.kineto_results.events()
    if e.device_type() == DeviceType.PrivateUse1
]
print(json.dumps({"rows": rows, "activities": activities, "two": two}))
"""

RUNTIME_ROWS = (
    "vdevLaunchKernel",
    "vdevMemcpyAsync",
    "vdevMemsetAsync",
    "vdevGraphLaunch",
    "vdevEventRecord",
    "vdevStreamWaitEvent",
    "vdevStreamSynchronize",
    "vdevDeviceSynchronize",
    "vdevEventSynchronize",
)


@pytest.fixture(scope="module")
def step():
    r = run_python(CHILD, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_runtime_rows_have_no_device_time(step):
    rows = {r["key"]: r for r in step["rows"]}
    assert {"vdevLaunchKernel", "vdevEventRecord"} <= rows.keys()
    for name in RUNTIME_ROWS:
        if name in rows:
            assert rows[name]["device_time_total"] == 0, rows[name]
            assert rows[name]["self_device_time_total"] == 0, rows[name]


def test_device_totals_count_each_activity_once(step):
    activities = [a for a in step["activities"] if not a["annotation"]]
    names = {a["name"] for a in activities}
    # Every kind of task ran.
    expected = {
        "Memcpy HtoD (Pinned -> Device)",
        "Memcpy HtoD (Pageable -> Device)",
        "Memcpy DtoH (Device -> Pinned)",
        "Memcpy DtoH (Device -> Pageable)",
        "Memcpy DtoD (Device -> Device)",
        "Memset (Device)",
        "Stream wait event",
        "vdev_kernel<direct_copy_kernel>",
        "vdev_kernel<aten::add_>",  # inside the graph replay
        "vdev_kernel<aten::mm>",
    }
    if step["two"]:
        expected.add("Memcpy PtoP (Device -> Device)")
    assert expected <= names, expected - names
    total = sum(a["us"] for a in activities)
    linked = sum(a["us"] for a in activities if a["linked"] > 0)
    # Work queued outside any operator has none to be credited to, on CUDA too: the unfollowed
    # thread's launches, and what Python queues directly (stream waits, the graph replay's
    # operations). record_function ranges are no launching operator (torch pushes them to Kineto
    # as user correlations, which CUPTI's kernels are not linked by either).
    unlinked = [a["name"] for a in activities if a["linked"] == 0]
    assert unlinked.count("vdev_kernel<aten::add>") == 20
    assert set(unlinked) <= {
        "vdev_kernel<aten::add>",
        "Stream wait event",
        "vdev_kernel<aten::add_>",
        "vdev_kernel<aten::mul_>",
    }

    device_rows = [
        r for r in step["rows"] if r["device_type"] != "DeviceType.CPU" and not r["user_annotation"]
    ]
    cpu_rows = [r for r in step["rows"] if r["device_type"] == "DeviceType.CPU"]
    assert sum(r["self_device_time_total"] for r in device_rows) == pytest.approx(total, rel=1e-6)
    # Each linked activity is credited once, to its operator; nothing else gets device time.
    assert sum(r["self_device_time_total"] for r in cpu_rows) == pytest.approx(linked, rel=1e-6)


class _Replay:
    graph = None


# An operator that replays a graph: what the replay ran is credited to it. Defined through a
# Library, not torch.library.custom_op: from torch 2.14 on a custom_op call records no operator
# event of its own in the profiler.
_LIB = torch.library.Library("vdev_profiler_test", "DEF")
_LIB.define("replay(Tensor anchor) -> ()")
_LIB.impl("replay", lambda anchor: _Replay.graph.replay(), "PrivateUse1")
replay_op = torch.ops.vdev_profiler_test.replay


def test_a_graph_replay_is_credited_by_its_operations():
    x = torch.zeros(64, device="vdev")
    side = torch.vdev.Stream()
    g = torch.accelerator.Graph()
    with torch.vdev.stream(side), g:
        x.add_(1)
        x.mul_(3)
    torch.vdev.synchronize()
    _Replay.graph = g
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        replay_op(x)
        torch.vdev.synchronize()
    rows = {r.key: r for r in prof.key_averages()}
    inner = (
        rows["vdev_kernel<aten::add_>"].self_device_time_total
        + rows["vdev_kernel<aten::mul_>"].self_device_time_total
    )
    assert inner > 0
    # Like a CUDA graph's kernels, the operations a replay runs belong to the operator that
    # launched it, and are counted once: the replay's span over them is an annotation, in no
    # device total and credited to no operator.
    assert rows["vdev_profiler_test::replay"].device_time_total == pytest.approx(inner, rel=1e-6)
    assert rows["Graph replay"].is_user_annotation
    device_rows = [
        r for r in rows.values() if r.device_type != DeviceType.CPU and not r.is_user_annotation
    ]
    assert sum(r.self_device_time_total for r in device_rows) == pytest.approx(inner, rel=1e-6)
    assert x.cpu()[0] == 3
