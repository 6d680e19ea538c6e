"""Configuration errors (issue 50: "the tools never cry wolf and never lie"): while a malformed
VDEV_* variable leaves vdev unavailable, torch.profiler runs CPU-only, as without a GPU."""

import json

import torch

from conftest import run_python

COUNT = "expected an integer in 1..64"


def test_a_cpu_only_profile_works_and_keeps_its_trace_while_vdev_is_unavailable(tmp_path):
    """With a malformed VDEV_* variable vdev is unavailable: torch.profiler lists no vdev activity
    (as it lists no CUDA one without a GPU), so profile() of CPU code runs CPU-only and keeps its
    trace; using a device still raises the configuration error."""
    trace = tmp_path / "trace.json"
    r = run_python(
        f"""
        import json, warnings
        import torch
        from torch.profiler import ProfilerActivity, profile
        warnings.simplefilter("ignore")
        print("SUPPORTED", sorted(a.name for a in torch.profiler.supported_activities()))
        with profile() as p:
            torch.ones(3).add(1)
        print("EVENTS", sorted({{e.name for e in p.events()}} & {{"aten::add", "aten::ones"}}))
        p.export_chrome_trace({str(trace)!r})
        try:
            torch.zeros(1, device="vdev")
        except RuntimeError as e:
            print("ERR", e)
        """,
        env={"VDEV_DEVICE_COUNT": "abc"},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert "SUPPORTED ['CPU']" in lines
    assert "EVENTS ['aten::add', 'aten::ones']" in lines
    assert any(e.get("name") == "aten::add" for e in json.loads(trace.read_text())["traceEvents"])
    assert "ERR [config] VDEV_DEVICE_COUNT='abc' is not a valid device count: " + COUNT in lines


def test_vdev_activity_is_supported_while_vdev_is_available():
    assert torch.vdev.is_available()
    supported = torch.profiler.supported_activities()
    assert torch.profiler.ProfilerActivity.PrivateUse1 in supported
