"""Warnings raised by queued kernels reach Python's warnings machinery at the next host
synchronization point, once each, with CPU's category and message plus where the kernel ran."""

import warnings

import pytest
import torch
from asyncutil import gated, wait_until_blocked

DEV = "vdev"


def cpu_warning(fn) -> str:
    """The message CPU's own call warns with."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn("cpu")
    assert len(caught) == 1, [str(w.message) for w in caught]
    return str(caught[0].message).split(" (Triggered internally")[0]


def std_of_one(device):
    return torch.ones(1, device=device).std()


def var_mean_of_one(device):
    return torch.var_mean(torch.ones(1, 1, device=device), dim=1)


def recorded(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [w for w in caught if "queued on vdev" in str(w.message)]


@pytest.mark.parametrize("kernel", [std_of_one, var_mean_of_one], ids=["std", "var_mean"])
def test_a_queued_kernels_warning_is_issued_at_the_next_synchronize(kernel):
    expected = cpu_warning(kernel)
    with gated(torch.vdev.current_stream()) as gate:
        wait_until_blocked(gate)
        at_call = recorded(lambda: kernel(DEV))  # queued: the kernel has not run
    assert at_call == []
    issued = recorded(torch.vdev.synchronize)
    assert len(issued) == 1
    assert issued[0].category is UserWarning
    message = str(issued[0].message)
    assert message.startswith(expected), message  # CPU's text first
    assert "queued on vdev:0 stream 0" in message
    assert recorded(torch.vdev.synchronize) == []  # issued once


def test_every_call_warns_as_on_cpu():
    for _ in range(3):
        std_of_one(DEV)
    assert len(recorded(torch.vdev.synchronize)) == 3


@pytest.mark.parametrize(
    "sync_point",
    [
        lambda t: t.cpu(),
        lambda t: t.sum().item(),
        lambda t: torch.vdev.current_stream().synchronize(),
        lambda t: torch.vdev.current_stream().record_event().synchronize(),
        lambda t: t.nonzero(),
    ],
    ids=["copy to host", "item", "Stream.synchronize", "Event.synchronize", "host operator"],
)
def test_every_synchronization_point_issues_them(sync_point):
    out = std_of_one(DEV)
    issued = recorded(lambda: sync_point(out))
    assert len(issued) == 1 and "aten::std" in str(issued[0].message)


def test_warnings_as_errors_raise_at_the_synchronize_and_lose_no_work():
    x = torch.ones(1, device=DEV)
    y = x.std()
    z = x + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="degrees of freedom"):
            torch.vdev.synchronize()
    assert torch.isnan(y.cpu()).item() and z.cpu().item() == 2.0


def test_workers_print_nothing_themselves(capfd):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        std_of_one(DEV)
        var_mean_of_one(DEV)
        torch.vdev.synchronize()
    assert "Warning" not in capfd.readouterr().err


def test_the_warnings_of_a_failing_stream_come_with_its_error():
    stream = torch.vdev.Stream()
    index = torch.tensor([5], device=DEV)
    with torch.vdev.stream(stream):
        std_of_one(DEV)
        torch.ones(3, device=DEV).index_select(0, index)  # fails on the stream
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises((RuntimeError, IndexError), match="out of range|index"):
            stream.synchronize()
    assert any("aten::std" in str(w.message) for w in caught)
