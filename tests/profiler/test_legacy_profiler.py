"""torch.autograd.profiler.profile(use_device="vdev") without Kineto's tracing (use_kineto=False,
the default: torch's KINETO_PRIVATEUSE1_FALLBACK state) times each operator on the device with
the events vdev's profiler stubs record, as CUDA's stubs do with cudaEvents (issue 50, item 4).
(cpp/backend/profiler/legacy_stubs.cpp)"""

import math

import torch


def test_legacy_profiling_gives_each_operator_a_sane_device_time(capfd):
    x = torch.randn(256, 256, device="vdev")
    torch.vdev.synchronize()
    with torch.autograd.profiler.profile(use_device="vdev") as prof:
        for _ in range(3):
            x = torch.mm(x, x).tanh()
        torch.vdev.synchronize()
    # Without stubs torch logged a failed assert for every operator.
    assert "not enabled" not in capfd.readouterr().err
    events = prof.function_events
    assert events
    for e in events:
        assert not math.isnan(e.device_time_total) and e.device_time_total >= 0, e
        assert not math.isnan(e.self_device_time_total), e
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["aten::mm"].count == 3
    assert rows["aten::mm"].device_time_total > 0


def test_an_operator_captured_in_a_graph_has_no_device_time():
    # Queued into a graph, an operator does not run during the profile: no event is recorded on
    # the capturing stream (it would be captured and never complete), and its time is 0.
    x = torch.zeros(64, device="vdev")
    side = torch.vdev.Stream()
    torch.vdev.synchronize()
    with torch.autograd.profiler.profile(use_device="vdev") as prof:
        g = torch.accelerator.Graph()
        with torch.vdev.stream(side), g:
            x.add_(1)
        g.replay()
        torch.vdev.synchronize()
    (captured,) = [e for e in prof.function_events if e.name == "aten::add_"]
    assert captured.device_time_total == 0
    assert x.cpu()[0] == 1  # the capture holds only the operator: one replay adds once
