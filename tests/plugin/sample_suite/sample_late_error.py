"""Seeded late errors: each of these tests queues an operator that fails on the device's worker
(an index out of bounds is only found there, reading the index tensor: a device-side assert, which
makes the device unusable afterwards, as on CUDA) and, but for two, returns without
synchronizing. Run by tests/plugin/test_pytest_plugin.py in a nested pytest, never collected by
the outer suite (sample_*.py is not a test file name)."""

import pytest
import torch


def _queue_an_out_of_bounds_index(device: str = "vdev") -> torch.Tensor:
    x = torch.arange(6.0, device=device)
    return x[torch.tensor([10], device=device)]  # queued: fails on the worker, not here


def test_queues_a_failing_operator():
    _queue_an_out_of_bounds_index()


def test_next_test_uses_the_device():
    assert (torch.arange(3.0, device="vdev") + 1).cpu().tolist() == [1.0, 2.0, 3.0]


def test_fails_on_its_own_after_queuing_a_failing_operator():
    _queue_an_out_of_bounds_index("vdev:1")
    assert 1 + 1 == 3, "its own failure"


def test_after_its_own_failure_the_next_test_uses_the_device():
    assert (torch.ones(2, device="vdev:1") * 2).cpu().tolist() == [2.0, 2.0]


def test_handles_its_assert_then_uses_the_device_again():
    _queue_an_out_of_bounds_index()
    with pytest.raises(torch.AcceleratorError):
        torch.vdev.synchronize()
    torch.ones(2, device="vdev").cpu()  # unusable after the assert, as a CUDA device would be


def test_handles_its_assert_and_stops():
    _queue_an_out_of_bounds_index()
    with pytest.raises(torch.AcceleratorError, match="device-side assert triggered"):
        torch.vdev.synchronize()


def test_skips_after_queuing_a_failing_operator():
    _queue_an_out_of_bounds_index()
    pytest.skip("skipped after queuing")


def test_last_test_uses_the_device():
    assert torch.ones(4, device="vdev").sum().item() == 4.0
