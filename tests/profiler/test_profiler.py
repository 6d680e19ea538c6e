"""torch.profiler on vdev (issue 33): ProfilerActivity.PrivateUse1 records what each stream ran,
with its real start and end, on one track per stream, linked to the host operator that queued it
(device time per operator, flow arrows), copies as memcpy activities, fills as memsets, waits
between streams, and the host calls that waited for the device.

The trace is read back from torch's own results: key_averages() and the exported chrome trace.
(cpp/backend/profiler/kineto_plugin.cpp)"""

import json
import time

import pytest
import torch
from asyncutil import gated, wait_until_blocked
from torch.profiler import ProfilerActivity, profile

DEVICE_ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def chrome_trace(prof, tmp_path) -> list[dict]:
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return json.loads(path.read_text())["traceEvents"]


def spans(events, cat=None, name=None):
    return [
        e
        for e in events
        if e.get("ph") == "X"
        and (cat is None or e.get("cat") == cat)
        and (name is None or e["name"].startswith(name))
    ]


def test_each_device_activity_has_its_launch_and_operator(tmp_path):
    x = torch.randn(128, 128, device="vdev")
    torch.vdev.synchronize()
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        y = x @ x
        z = y + 1
        torch.vdev.synchronize()
    events = chrome_trace(prof, tmp_path)
    kernels = spans(events, "kernel", "vdev_kernel<")
    assert {k["name"] for k in kernels} >= {"vdev_kernel<aten::mm>", "vdev_kernel<aten::add>"}
    launches = {
        e["args"]["correlation"]: e
        for e in spans(events, "privateuse1_runtime")
        if "correlation" in e["args"]  # launches; host waits (synchronize) have none
    }
    ops = {e["args"]["External id"]: e for e in spans(events, "cpu_op")}
    for k in kernels:
        launch = launches[k["args"]["correlation"]]
        assert launch["name"] == "vdevLaunchKernel"
        assert k["ts"] >= launch["ts"]  # never before its launch
        assert k["pid"] == 0 and k["args"]["device"] == 0 and k["tid"] == k["args"]["stream"]
        op = ops[k["args"]["External id"]]  # the host operator that queued it
        assert op["name"] == k["name"][len("vdev_kernel<") : -1]
        assert op["ts"] <= launch["ts"] <= op["ts"] + op["dur"]
    # Flow arrows from each launch to its kernel.
    starts = {e["id"] for e in events if e.get("ph") == "s"}
    ends = {e["id"] for e in events if e.get("ph") == "f"}
    assert {k["args"]["correlation"] for k in kernels} <= starts & ends
    del z


def test_device_time_is_attributed_to_the_operator():
    x = torch.randn(256, 256, device="vdev")
    torch.vdev.synchronize()
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        for _ in range(3):
            x = torch.mm(x, x).tanh()
        torch.vdev.synchronize()
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["aten::mm"].count == 3  # vdev's own meta and stand-in calls are not shown
    assert rows["aten::mm"].device_time_total > 0
    assert rows["vdev_kernel<aten::mm>"].self_device_time_total > 0
    assert rows["aten::mm"].device_time_total == pytest.approx(
        rows["vdev_kernel<aten::mm>"].self_device_time_total
    )


def test_a_task_held_by_a_gate_spans_the_time_it_was_held(tmp_path):
    s = torch.vdev.current_stream()
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        with gated(s) as gate:
            wait_until_blocked(gate)
            blocked = time.time_ns()
            # The worker is inside the gate's task now; it stays there until the gate opens.
            while time.time_ns() - blocked < 2_000_000:
                pass
            opened = time.time_ns()
        torch.vdev.synchronize()
    (held,) = spans(chrome_trace(prof, tmp_path), "kernel", "vdev_kernel<test_gate>")
    # A bound, not a timing race: the task started before `blocked` and ended after `opened`.
    assert held["dur"] * 1000 >= opened - blocked - 1000


def test_one_track_per_stream_and_device_used(tmp_path):
    if torch.vdev.device_count() < 2:
        pytest.skip("needs two devices")
    side = torch.vdev.Stream(0)
    x = torch.ones(1000, device="vdev:0")
    torch.vdev.synchronize()
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        x.add_(1)
        side.wait_stream(torch.vdev.current_stream())
        with torch.vdev.stream(side):
            x.mul_(2)
        y = torch.ones(10, device="vdev:1") * 3
        torch.vdev.synchronize(0)
        torch.vdev.synchronize(1)
    events = chrome_trace(prof, tmp_path)
    tracks = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e["name"] == "thread_name" and e["pid"] in (0, 1)
    }
    used = {(k["pid"], k["tid"]) for k in spans(events, "kernel")}
    assert (0, 0) in used and (0, side.stream_id) in used and (1, 0) in used
    for track in used:
        assert tracks[track] == f"stream {track[1]}"
    processes = {
        e["pid"]: e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e["name"] == "process_name"
    }
    assert processes[0] == "vdev" and processes[1] == "vdev"
    del y


def test_copies_are_memcpy_activities_and_fills_memsets(tmp_path):
    host = torch.arange(4096, dtype=torch.float32).pin_memory()
    dev = torch.empty(4096, device="vdev")
    torch.vdev.synchronize()
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        dev.copy_(host, non_blocking=True)  # queued
        back = dev.cpu()  # blocking: runs once the stream is idle
        dev.zero_()
        torch.vdev.synchronize()
    events = chrome_trace(prof, tmp_path)
    copies = {e["name"]: e for e in spans(events, "gpu_memcpy")}
    assert copies["Memcpy HtoD (Pinned -> Device)"]["args"]["bytes"] == 4096 * 4
    assert copies["Memcpy DtoH (Device -> Pageable)"]["args"]["bytes"] == 4096 * 4
    (fill,) = spans(events, "gpu_memset")
    assert fill["args"]["bytes"] == 4096 * 4
    assert back[4095] == 4095


def test_waits_between_streams_and_host_waits_are_shown(tmp_path):
    side = torch.vdev.Stream()
    x = torch.ones(100, device="vdev")
    torch.vdev.synchronize()  # written before the side stream updates it
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        with torch.vdev.stream(side):
            x.mul_(2)
        torch.vdev.current_stream().wait_stream(side)
        x.add_(1)
        torch.vdev.current_stream().synchronize()
    events = chrome_trace(prof, tmp_path)
    (wait,) = spans(events, "kernel", "Stream wait event")
    assert wait["tid"] == 0
    runtime = {e["name"] for e in spans(events, "privateuse1_runtime")}
    assert {"vdevEventRecord", "vdevStreamWaitEvent", "vdevStreamSynchronize"} <= runtime


def test_each_profile_has_only_its_own_activities(tmp_path):
    x = torch.ones(10, device="vdev")
    with profile(activities=DEVICE_ACTIVITIES):
        x.add_(1)
    x.mul_(3)  # between profiles: recorded nowhere
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        x.sub_(1)
        torch.vdev.synchronize()
    names = {k["name"] for k in spans(chrome_trace(prof, tmp_path), "kernel")}
    assert names == {"vdev_kernel<aten::sub_>"}


def test_a_cpu_only_profile_has_no_device_activities(tmp_path):
    x = torch.ones(10, device="vdev")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        x.add_(1)
        torch.vdev.synchronize()
    events = chrome_trace(prof, tmp_path)
    assert not spans(events, "kernel")
    assert any(e["name"] == "aten::add_" for e in spans(events, "cpu_op"))


def test_a_graph_replay_shows_the_operations_inside_it(tmp_path):
    side = torch.vdev.Stream()
    x = torch.zeros(64, device="vdev")
    torch.vdev.synchronize()
    g = torch.accelerator.Graph()
    with side, g:
        x.add_(1)
        x.mul_(3)
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        g.replay()
        torch.vdev.synchronize()
    events = chrome_trace(prof, tmp_path)
    # The replay is an annotation over the operations it runs (in no device total).
    (replay,) = spans(events, "gpu_user_annotation", "Graph replay")
    inner = [k for k in spans(events, "kernel", "vdev_kernel<") if k["tid"] == replay["tid"]]
    assert [k["name"] for k in inner] == ["vdev_kernel<aten::add_>", "vdev_kernel<aten::mul_>"]
    for k in inner:  # on the replay's track, inside its span
        assert replay["ts"] <= k["ts"] and k["ts"] + k["dur"] <= replay["ts"] + replay["dur"] + 1
    assert "vdevGraphLaunch" in {e["name"] for e in spans(events, "privateuse1_runtime")}
    assert x.cpu()[0] == 3


def test_compiled_kernels_are_device_activities(tmp_path):
    @torch.compile
    def f(x):
        return (x * 2).sin() + 1

    x = torch.randn(1000, device="vdev")
    f(x)  # compiled outside the profile
    torch.vdev.synchronize()
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        y = f(x)
        torch.vdev.synchronize()
    kernels = [k["name"] for k in spans(chrome_trace(prof, tmp_path), "kernel", "vdev_kernel<")]
    # Inductor's generated kernel, not eager operators.
    assert kernels and all("aten::" not in k for k in kernels), kernels
    torch.testing.assert_close(y.cpu(), (x.cpu() * 2).sin() + 1)
