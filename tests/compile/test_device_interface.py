"""Dynamo's device interface for vdev (issue 14, item 1): registered without slowing
``import torch``, and every member is the real torch.vdev function."""

import pytest
import torch
from asyncutil import gated, run_bounded, wait_until_blocked
from torch._dynamo.device_interface import get_interface_for_device

from child_process import run_python
from torch_vdev.compile.device_interface import VdevInterface


def test_import_torch_does_not_import_dynamo_and_dynamo_finds_vdev():
    out = run_python(
        """
        import sys
        import torch
        print("dynamo imported by torch:", "torch._dynamo" in sys.modules)
        torch.ones(1, device="vdev") + 1
        from torch._dynamo.device_interface import get_interface_for_device as interface
        print(interface("vdev").__name__, interface("vdev:1").__name__)
        """
    )
    assert out.returncode == 0, out.stderr
    assert "dynamo imported by torch: False" in out.stdout
    assert "VdevInterface VdevInterface" in out.stdout


def test_dynamo_imported_before_the_backend_still_finds_vdev():
    out = run_python(
        """
        import torch._dynamo
        import torch_vdev
        from torch._dynamo.device_interface import get_interface_for_device
        print(get_interface_for_device("vdev").__name__)
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["VdevInterface"]


def test_finding_dynamo_without_importing_it_keeps_the_hook():
    out = run_python(
        """
        import importlib.util
        import torch
        importlib.util.find_spec("torch._dynamo")
        import torch._dynamo
        from torch._dynamo.device_interface import get_interface_for_device
        print(get_interface_for_device("vdev").__name__)
        """
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["VdevInterface"]


def test_registered_for_the_device_and_each_index(device_count):
    assert get_interface_for_device("vdev") is VdevInterface
    assert get_interface_for_device(torch.device("vdev", 1)) is VdevInterface
    assert get_interface_for_device(f"vdev:{device_count - 1}") is VdevInterface


def test_device_selection_members_are_torch_vdev(device_count):
    di = VdevInterface
    assert di.is_available() and di.device_count() == device_count
    assert di.current_device() == 0
    assert di.exchange_device(1) == 0 and torch.vdev.current_device() == 1
    assert di.maybe_exchange_device(-1) == 1 and torch.vdev.current_device() == 1
    assert di.maybe_exchange_device(0) == 1 and torch.vdev.current_device() == 0
    with di.device(1):
        assert di.current_device() == 1
    di.set_device(1)
    assert torch.vdev.current_device() == 1
    with pytest.raises(IndexError):
        di.set_device(device_count)


def test_streams_and_raw_stream_handles():
    di = VdevInterface
    side = di.Stream()
    assert isinstance(side, torch.Stream) and isinstance(di.Event(), torch.Event)
    default_handle = di.get_raw_stream(0)
    assert default_handle == di.get_raw_stream(0) != di.get_raw_stream(1)
    with di.stream(side):
        assert di.current_stream() == side
        side_handle = di.get_raw_stream(0)
    assert side_handle != default_handle and di.get_raw_stream(0) == default_handle
    di.set_stream(side)
    assert di.get_raw_stream(0) == side_handle and torch.vdev.current_stream() == side
    di._set_stream_by_id(0, 0, torch.vdev.default_stream().device_type)
    assert di.current_stream() == torch.vdev.default_stream()


def test_synchronize_waits_for_queued_work():
    x = torch.ones(4, device="vdev")
    with gated(torch.vdev.current_stream()) as gate:
        y = x + 1
        wait_until_blocked(gate)
        assert not run_bounded(VdevInterface.synchronize, timeout=0.5)
    assert run_bounded(VdevInterface.synchronize)
    assert y.cpu().tolist() == [2.0] * 4


def test_memory_and_properties(device_count):
    di = VdevInterface
    before = di.memory_allocated(0)
    x = torch.empty(1 << 20, device="vdev")
    assert di.memory_allocated(0) >= before + x.nbytes
    props = di.get_device_properties(1)
    assert props == torch.vdev.get_device_properties(1)
    assert di.Worker.get_device_properties("vdev:1").name == props.name
    assert di.Worker.current_device() == 0
    major, minor = torch.vdev.get_device_capability()
    assert di.get_compute_capability() == major * 10 + minor
    assert di.is_bf16_supported() and di.is_dtype_supported(torch.bfloat16)
    assert not di.is_triton_capable()
    with pytest.raises(RuntimeError, match="not Triton"):
        di.raise_if_triton_unavailable()
