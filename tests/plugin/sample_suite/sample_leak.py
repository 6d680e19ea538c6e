"""Seeded leaks for --vdev-leak-check: a module-level list keeps device tensors alive after the
tests that made them. Run by tests/plugin/test_pytest_plugin.py in a nested pytest."""

import pytest
import torch

_KEPT: list[torch.Tensor] = []


@pytest.fixture
def recording():
    torch.vdev.memory._record_memory_history(stacks="python")
    yield
    torch.vdev.memory._record_memory_history(None)


def _cache_on_a_side_stream() -> None:
    with torch.vdev.stream(torch.vdev.Stream()):
        _KEPT.append(torch.ones(3000, device="vdev"))  # 12000 bytes


def test_leaks_a_tensor():
    _KEPT.append(torch.ones(1000, device="vdev"))  # 4000 bytes


def test_leaks_a_tensor_while_history_records(recording):
    _cache_on_a_side_stream()


def test_frees_what_it_allocates():
    y = torch.ones(5000, device="vdev")
    assert (y * 2).sum().item() == 10000.0


def test_a_temporary_freed_by_the_garbage_collector():
    cycle: list = [torch.ones(100, device="vdev")]
    cycle.append(cycle)  # freed only by gc.collect(), which the leak check runs
