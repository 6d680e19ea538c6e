"""Errors of queued work: the kernel's Python type and message are kept, no error is dropped, and a
device-wide synchronize reports every failed stream."""

import pytest
import torch
from asyncutil import failing_operator, gated

DEV = "vdev"


@pytest.fixture(autouse=True)
def _failures_as_plain_errors():
    """These tests are about how any task's error is delivered (its kind and message, once per
    thread, through events). The index and probability failures they use are device-side asserts,
    whose lasting state tests/streams/test_device_asserts.py covers: here they are plain errors."""
    from torch_vdev import _testing as rt

    rt.set_device_asserts(False)
    yield
    rt.set_device_asserts(True)


def out_of_range_index(device):
    return torch.ones(3, device=device).index_select(0, torch.tensor([5], device=device))


# Failures that depend on the data in device memory, as CUDA's device-side asserts do: argument
# checks that do not are raised at the call (tests/fidelity/test_argument_checks.py).
def negative_probability(device):
    return torch.multinomial(torch.tensor([-1.0, 2.0], device=device), 1)


def target_out_of_bounds(device):
    target = torch.tensor([0, 5], device=device)
    return torch.nn.functional.nll_loss(torch.zeros(2, 3, device=device), target)


@pytest.mark.parametrize(
    "kernel",
    [out_of_range_index, negative_probability, target_out_of_bounds],
    ids=["index", "probability", "target"],
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
    probabilities = torch.tensor([-1.0, 2.0], device=DEV)
    with gated(torch.vdev.current_stream()):  # all three fail only after the last is queued
        ones.index_select(0, far)
        sample = torch.multinomial(probabilities, 1)
        ones.index_select(0, farther)
    with pytest.raises(IndexError) as info:  # the first one's type
        torch.vdev.current_stream().synchronize()
    message = str(info.value)
    assert message.count("[aten::index_select]") == 2 and "[aten::multinomial]" in message
    assert "2 later error(s)" in message
    del sample
    torch.vdev.synchronize()  # reported once: nothing left


def test_a_device_wide_synchronize_reports_every_failed_stream():
    ones = torch.ones(3, device=DEV)
    far = torch.tensor([5], device=DEV)
    probabilities = torch.tensor([-1.0, 2.0], device=DEV)
    first, second = torch.vdev.Stream(), torch.vdev.Stream()
    with torch.vdev.stream(first):
        ones.index_select(0, far)
    with torch.vdev.stream(second):
        torch.multinomial(probabilities, 1)
    with pytest.raises(IndexError) as info:
        torch.vdev.synchronize()
    message = str(info.value)
    assert f"stream {first.stream_id})" in message and f"stream {second.stream_id})" in message
    assert "another stream failed too" in message
    torch.vdev.synchronize()


def test_a_worker_thread_that_cannot_start_raises_and_queues_nothing():
    from torch_vdev import _testing as rt

    s = torch.vdev.Stream(  # brand new: no worker yet (the pool's streams may have one)
        stream_id=rt.new_stream(0),
        device_index=0,
        device_type=torch.vdev.current_stream().device_type,
    )
    x = torch.ones(4, device=DEV)
    torch.vdev.current_stream().synchronize()  # written before s reads it (queues nothing on s)
    rt.fail_next_worker_start()
    with torch.vdev.stream(s):
        with pytest.raises(RuntimeError, match="cannot start the worker thread of vdev:0 stream"):
            y = x * 3
        # Nothing was counted: the stream is idle and synchronizing cannot hang.
        assert s.query()
        s.synchronize()
        y = x * 3  # the next enqueue starts the worker
        assert y.cpu().tolist() == [3.0] * 4


def test_a_queued_task_keeps_its_name_after_its_operator_is_deregistered():
    lib = failing_operator("vdev_name_lifetime")
    x = torch.ones(3, device=DEV)
    with gated(torch.vdev.current_stream()):
        torch.ops.vdev_name_lifetime.boom(x)
        lib._destroy()  # frees the operator's schema, where its name lived, while queued
        del lib
    with pytest.raises(Exception) as failed:
        torch.vdev.synchronize()
    assert str(failed.value).startswith("[vdev_name_lifetime::boom] ")
    assert (x + 1).cpu().tolist() == [2.0] * 3  # the device goes on working


def run_in_thread(fn):
    """Runs fn on a new thread; returns what it returned or raised."""
    import threading

    result = {}

    def body():
        try:
            result["value"] = fn()
        except Exception as e:  # noqa: BLE001
            result["error"] = e

    t = threading.Thread(target=body)
    t.start()
    t.join(60)
    assert not t.is_alive()
    return result


def test_the_thread_that_queued_a_failure_learns_of_it_even_if_another_thread_looked_first():
    dev = "vdev:1"
    ones = torch.ones(3, device=dev)
    five, six = torch.tensor([5], device=dev), torch.tensor([6], device=dev)
    with gated(torch.vdev.current_stream(1)):
        ones.index_select(0, five)  # fails: queued by this thread
        ones.index_select(0, six)  # and again

    # Another thread synchronizes first: it is told of both errors.
    other = run_in_thread(lambda: torch.vdev.synchronize(1))
    assert isinstance(other.get("error"), IndexError)
    assert "index out of range" in str(other["error"])
    assert "1 later error(s)" in str(other["error"])

    # The queuing thread still learns of them, at its next synchronizing call on that stream.
    with pytest.raises(IndexError, match="1 later error"):
        ones.cpu()
    # Then they are gone, for every thread.
    assert run_in_thread(lambda: torch.vdev.synchronize(1)) == {"value": None}
    torch.vdev.synchronize(1)
    assert ones.cpu().tolist() == [1.0] * 3


def test_an_error_raised_on_its_own_thread_is_not_raised_again_elsewhere():
    ones = torch.ones(3, device=DEV)
    ones.index_select(0, torch.tensor([5], device=DEV))
    with pytest.raises(IndexError):
        torch.vdev.synchronize()
    assert run_in_thread(torch.vdev.synchronize) == {"value": None}


def test_an_event_carries_the_error_with_its_type():
    ones = torch.ones(3, device=DEV)
    five = torch.tensor([5], device=DEV)
    e = torch.vdev.Event()
    with gated(torch.vdev.current_stream()):  # both queued before the failure can happen
        ones.index_select(0, five)
        e.record()
    with pytest.raises(IndexError, match="event recorded after a failed operation"):
        e.synchronize()
    with pytest.raises(IndexError):
        torch.vdev.synchronize()  # the stream's own report is separate
