"""Warnings raised by queued kernels reach Python's warnings machinery at the next host
synchronization point, once each, with the kernel's category and message plus where it ran. A
warning CPU's kernel raises from sizes and flags comes at the call instead (the stand-in check
sees it first), as a CUDA operator's host-side warning does; the queued ones are those only the
worker sees (values), made here by a testing probe: a task that warns on the stream worker."""

import warnings

import pytest
import torch
from asyncutil import gated, wait_until_blocked

from torch_vdev import _testing as rt

DEV = "vdev"
TEXT = "a kernel's warning"


def queued_warning(device=DEV):
    """Queues a task that warns TEXT on the current stream's worker."""
    stream = torch.vdev.current_stream()
    rt.enqueue_warning(stream.device.index, stream.stream_id, TEXT)


def std_of_one(device):
    return torch.ones(1, device=device).std()


def var_mean_of_one(device):
    return torch.var_mean(torch.ones(1, 1, device=device), dim=1)


@pytest.mark.parametrize("kernel", [std_of_one, var_mean_of_one], ids=["std", "var_mean"])
def test_a_warning_cpus_kernel_raises_from_sizes_comes_at_the_call(kernel):
    with warnings.catch_warnings(record=True) as on_cpu:
        warnings.simplefilter("always")
        kernel("cpu")
    for _ in range(2):  # the first call makes the launch plan, the second reuses it
        with warnings.catch_warnings(record=True) as at_call:
            warnings.simplefilter("always")
            kernel(DEV)
        assert [str(w.message) for w in at_call] == [str(w.message) for w in on_cpu]
        assert "degrees of freedom" in str(at_call[0].message)
        assert recorded(torch.vdev.synchronize) == []  # nothing left for later


def recorded(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [w for w in caught if "queued on vdev" in str(w.message)]


def test_a_queued_kernels_warning_is_issued_at_the_next_synchronize():
    with gated(torch.vdev.current_stream()) as gate:
        wait_until_blocked(gate)
        at_call = recorded(queued_warning)  # queued: the kernel has not run
    assert at_call == []
    issued = recorded(torch.vdev.synchronize)
    assert len(issued) == 1
    assert issued[0].category is UserWarning
    message = str(issued[0].message)
    assert message.startswith(TEXT), message  # the kernel's text first
    assert "raised by testing_warning, queued on vdev:0 stream 0" in message
    assert recorded(torch.vdev.synchronize) == []  # issued once


def test_every_queued_warning_is_issued():
    for _ in range(3):
        queued_warning()
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
    out = torch.ones(4, device=DEV)
    queued_warning()
    issued = recorded(lambda: sync_point(out))
    assert len(issued) == 1 and "testing_warning" in str(issued[0].message)


def test_warnings_as_errors_raise_at_the_synchronize_and_lose_no_work():
    x = torch.ones(1, device=DEV)
    queued_warning()
    z = x + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match=TEXT):
            torch.vdev.synchronize()
    assert z.cpu().item() == 2.0


def test_workers_print_nothing_themselves(capfd):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        queued_warning()
        std_of_one(DEV)
        torch.vdev.synchronize()
    assert "Warning" not in capfd.readouterr().err


def test_the_warnings_of_a_failing_stream_come_with_its_error():
    stream = torch.vdev.Stream()
    index = torch.tensor([5], device=DEV)
    with torch.vdev.stream(stream):
        queued_warning()
        torch.ones(3, device=DEV).index_select(0, index)  # fails on the stream
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises((RuntimeError, IndexError), match="out of range|index"):
            stream.synchronize()
    assert any("testing_warning" in str(w.message) for w in caught)
