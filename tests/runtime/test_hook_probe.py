"""The probe benchmarks/bench_hooks.py times the off path of the tools' hooks with: it must see
each tool's flag (or it would time checks the hot path does not make)."""

import pytest
import torch

from torch_vdev import _testing


def test_hook_checks_probe_times_the_off_path_and_sees_each_tool_turned_on():
    torch.ones(1, device="vdev")
    assert _testing.hook_checks_ns(1000) > 0
    torch.vdev.sanitizer.enable("streams")
    try:
        with pytest.raises(RuntimeError, match="a tool is on"):
            _testing.hook_checks_ns(10)
    finally:
        torch.vdev.sanitizer.disable()
    torch.vdev.memory._record_memory_history("all")
    try:
        with pytest.raises(RuntimeError, match="a tool is on"):
            _testing.hook_checks_ns(10)
    finally:
        torch.vdev.memory._record_memory_history(None)
    assert _testing.hook_checks_ns(1000) > 0
