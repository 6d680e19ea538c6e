"""Errors of queued work: the kernel's Python type and message are kept, no error is dropped, and a
device-wide synchronize reports every failed stream."""

import pytest
import torch
from asyncutil import gated

DEV = "vdev"


def out_of_range_index(device):
    return torch.ones(3, device=device).index_select(0, torch.tensor([5], device=device))


def uint16_add(device):
    return torch.ones(2, dtype=torch.uint16, device=device) + 1


def bool_relu(device):
    return torch.relu(torch.ones(2, dtype=torch.bool, device=device))


@pytest.mark.parametrize(
    "kernel", [out_of_range_index, uint16_add, bool_relu], ids=["index", "dtype", "relu"]
)
@pytest.mark.parametrize(
    "sync", [lambda t: torch.vdev.synchronize(), lambda t: t.cpu()], ids=["synchronize", "copy"]
)
def test_the_host_raises_the_type_and_message_cpu_raises(kernel, sync):
    with pytest.raises(Exception) as on_cpu:
        kernel("cpu")
    result = kernel(DEV)  # queued: the failure happens on the worker
    with pytest.raises(type(on_cpu.value)) as on_vdev:
        sync(result)
    message = str(on_vdev.value)
    assert str(on_cpu.value).split("\n")[0] in message
    assert "(on vdev:0 stream 0)" in message and "Exception raised from" not in message
    assert (torch.ones(2, device=DEV) + 1).cpu().tolist() == [2.0, 2.0]  # the stream still works


def test_no_error_of_a_stream_is_dropped():
    ones = torch.ones(3, device=DEV)
    far, farther = torch.tensor([5], device=DEV), torch.tensor([7], device=DEV)
    flags = torch.ones(2, dtype=torch.bool, device=DEV)
    with gated(torch.vdev.current_stream()):  # all three fail only after the last is queued
        ones.index_select(0, far)
        bool_relu_result = torch.relu(flags)
        ones.index_select(0, farther)
    with pytest.raises(IndexError) as info:  # the first one's type
        torch.vdev.current_stream().synchronize()
    message = str(info.value)
    assert message.count("[aten::index_select]") == 2 and "[aten::relu]" in message
    assert "2 later error(s)" in message
    del bool_relu_result
    torch.vdev.synchronize()  # reported once: nothing left


def test_a_device_wide_synchronize_reports_every_failed_stream():
    ones = torch.ones(3, device=DEV)
    far = torch.tensor([5], device=DEV)
    flags = torch.ones(2, dtype=torch.bool, device=DEV)
    first, second = torch.vdev.Stream(), torch.vdev.Stream()
    with torch.vdev.stream(first):
        ones.index_select(0, far)
    with torch.vdev.stream(second):
        torch.relu(flags)
    with pytest.raises(IndexError) as info:
        torch.vdev.synchronize()
    message = str(info.value)
    assert f"stream {first.stream_id})" in message and f"stream {second.stream_id})" in message
    assert "another stream failed too" in message
    torch.vdev.synchronize()
