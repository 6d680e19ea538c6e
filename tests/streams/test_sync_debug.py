"""torch.vdev.set_sync_debug_mode: CUDA's debug mode for operations that make the host wait."""

import pytest
import torch
from asyncutil import gated, run_bounded, sync_warnings, wait_until_blocked

DEV = "vdev"


@pytest.fixture(autouse=True)
def default_mode_after():
    yield
    torch.vdev.set_sync_debug_mode(0)


def test_modes_set_and_read_as_cudas():
    for value, expected in (("warn", 1), ("error", 2), ("default", 0), (1, 1), (2, 2), (0, 0)):
        torch.vdev.set_sync_debug_mode(value)
        assert torch.vdev.get_sync_debug_mode() == expected


@pytest.mark.parametrize("bad", ["loud", 3, -1, True, 1.0, None])
def test_an_invalid_mode_is_rejected_with_the_valid_ones(bad):
    torch.vdev.set_sync_debug_mode("warn")
    with pytest.raises(RuntimeError, match=r"invalid (value|argument).*(default|0 \(default\))"):
        torch.vdev.set_sync_debug_mode(bad)
    assert torch.vdev.get_sync_debug_mode() == 1  # unchanged


def test_each_host_wait_is_reported_once_with_its_operation():
    x = torch.arange(-4.0, 4.0, device=DEV)
    assert sync_warnings(lambda: x.sum().item()) == ["aten::_local_scalar_dense (.item())"]
    assert sync_warnings(lambda: x.cpu()) == ["copy_ from device to host, non_blocking=False"]
    assert sync_warnings(lambda: x.new_ones(4).resize_(64)) == ["resize_ growing a storage"]
    assert sync_warnings(lambda: torch.ones(3).to(DEV)) == [
        "copy_ from host to device, non_blocking=False"
    ]
    # Data-dependent output shapes synchronize on CUDA too; the operator's own copies to and from
    # the host are not reported again.
    assert sync_warnings(lambda: x.nonzero()) == ["aten::nonzero"]
    # A boolean mask becomes its indices first, which synchronizes in nonzero (as CUDA's
    # expandTensors does); the gather itself is then queued.
    assert sync_warnings(lambda: x[x > 0]) == ["aten::nonzero"]
    assert sync_warnings(lambda: torch.vdev.current_stream().synchronize()) == [
        "Stream.synchronize"
    ]


def test_queued_work_and_explicit_waits_are_not_reported():
    x = torch.randn(64, device=DEV)
    pinned = torch.empty(64, pin_memory=True)
    event = torch.vdev.Event()

    def body():
        y = torch.nn.functional.relu(x * 2 + 1).sum(0)
        y.add_(torch.tensor(1.0))  # a 0-dim CPU tensor is a scalar argument
        pinned.copy_(x, non_blocking=True)
        x.to("cpu", non_blocking=True)  # into pinned memory it allocates
        x.copy_(pinned, non_blocking=True)
        event.record()
        event.synchronize()  # explicit waits: never reported, as on CUDA
        torch.vdev.synchronize()

    assert sync_warnings(body) == []


def test_non_blocking_copies_that_wait_in_fact_are_reported_too():
    # On CUDA as on vdev a non_blocking copy whose host side is pageable (or pinned with gaps,
    # which CUDA stages through a pageable contiguous copy) waits for the stream; CUDA's debug
    # mode does not report it (large projects patch PyTorch to catch it), vdev's does.
    x = torch.arange(64.0, device=DEV)
    pageable = torch.arange(64.0)
    gappy = torch.zeros(128, pin_memory=True)[::2]
    assert gappy.is_pinned() and not gappy.is_contiguous()
    reports = sync_warnings(
        lambda: (
            x.copy_(pageable, non_blocking=True),
            torch.empty(64).copy_(x, non_blocking=True),
            torch.empty(64, device=DEV).copy_(gappy, non_blocking=True),
            gappy.copy_(x, non_blocking=True),
        )
    )
    assert reports == [
        "copy_ from pageable host memory to device, non_blocking=True (waits, as on CUDA)",
        "copy_ from device to pageable host memory, non_blocking=True (waits, as on CUDA)",
        "copy_ from non-dense pinned host memory to device, non_blocking=True (waits, as on CUDA)",
        "copy_ from device to non-dense pinned host memory, non_blocking=True (waits, as on CUDA)",
    ]
    assert gappy.tolist() == list(range(64))  # the copies happened at the calls


def test_error_mode_refuses_a_hidden_wait_before_waiting():
    x = torch.arange(5.0, device=DEV)
    with gated(torch.vdev.current_stream()) as gate:
        wait_until_blocked(gate)
        torch.vdev.set_sync_debug_mode("error")
        with pytest.raises(
            RuntimeError, match=r"pageable host memory to device, non_blocking=True"
        ):
            x.copy_(torch.ones(5), non_blocking=True)  # would wait for the gate forever
        torch.vdev.set_sync_debug_mode(0)
    assert x.tolist() == [0, 1, 2, 3, 4]  # refused: nothing copied


def test_error_mode_raises_before_waiting_and_loses_nothing():
    x = torch.arange(5.0, device=DEV)
    with gated(torch.vdev.current_stream()) as gate:
        y = x * 3  # queued behind the closed gate
        wait_until_blocked(gate)
        torch.vdev.set_sync_debug_mode("error")
        # Would wait for the gate forever if it waited before raising.
        for call, operation in (
            (lambda: y.sum().item(), r"aten::_local_scalar_dense \(\.item\(\)\)"),
            (lambda: y.cpu(), "copy_ from device to host"),
            (lambda: y.nonzero(), "aten::nonzero"),
        ):
            with pytest.raises(
                RuntimeError, match="called a synchronizing vdev operation: " + operation
            ):
                assert run_bounded(call)
        torch.vdev.set_sync_debug_mode("default")
    assert torch.equal(y.cpu(), torch.arange(5.0) * 3)
