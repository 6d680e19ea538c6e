"""Device guard (DeviceGuardImplInterface) and PrivateUse1 hooks, through torch's public APIs."""

import pytest
import torch

from torch_vdev import _testing as rt


def test_torch_accelerator_sees_vdev(device_count):
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("vdev")
    assert torch.accelerator.device_count() == device_count
    torch.accelerator.set_device_index(1)
    assert torch.accelerator.current_device_index() == 1 == torch.vdev.current_device()
    torch.accelerator.set_device_index("vdev:0")
    assert torch.accelerator.current_device_index() == 0


def test_accelerator_device_index_context_manager_nests_and_restores():
    with torch.accelerator.device_index(1):
        assert torch.vdev.current_device() == 1
        with torch.accelerator.device_index(0):
            assert torch.vdev.current_device() == 0
        assert torch.vdev.current_device() == 1
    assert torch.vdev.current_device() == 0
    with pytest.raises(RuntimeError):
        with torch.accelerator.device_index(1):
            raise RuntimeError("body")
    assert torch.vdev.current_device() == 0


def test_accelerator_rejects_out_of_range_and_keeps_state():
    torch.accelerator.set_device_index(1)
    with pytest.raises(IndexError, match=r"device index 5 out of range: 2 vdev devices \(0..1\)"):
        torch.accelerator.set_device_index(5)
    with pytest.raises(IndexError, match="device index 7 out of range"):
        with torch.accelerator.device_index(7):
            pytest.fail("body must not run")
    assert torch.accelerator.current_device_index() == 1


def test_device_guard_is_used_for_tensors_on_other_devices():
    # An operation on a vdev:1 tensor runs under a guard for vdev:1 and restores vdev:0.
    x = torch.arange(6.0, device="vdev:1")
    assert x.device == torch.device("vdev:1")
    y = (x * 2).reshape(2, 3).sum(0)
    assert y.device == torch.device("vdev:1")
    assert torch.vdev.current_device() == 0


def test_device_capability_lists_dtypes_without_quantized():
    dtypes = torch.accelerator.get_device_capability("vdev:1")["supported_dtypes"]
    assert torch.float32 in dtypes and torch.bfloat16 in dtypes and torch.complex64 in dtypes
    assert torch.qint8 not in dtypes
    with pytest.raises(IndexError):
        torch.accelerator.get_device_capability("vdev:2")


def test_hooks_report_availability_count_and_contexts(device_count):
    assert rt.hooks_is_available()
    assert rt.hooks_device_count() == device_count
    assert rt.hooks_has_primary_context(0) and rt.hooks_has_primary_context(device_count - 1)
    assert not rt.hooks_has_primary_context(device_count)
    assert not rt.hooks_has_primary_context(-1)
    assert rt.hooks_maybe_exchange_device(-1) == 0  # -1: no change


def test_hooks_map_pointers_to_devices():
    a = torch.empty(100, device="vdev:0")
    b = torch.empty(100, device="vdev:1")
    assert rt.hooks_device_from_ptr(a.data_ptr()) == 0
    assert rt.hooks_device_from_ptr(b.data_ptr() + 4 * 99) == 1  # interior pointer
    assert rt.pointer_device(b.data_ptr()) == 1
    host = torch.empty(100)
    with pytest.raises(ValueError, match="not inside any live vdev device allocation"):
        rt.hooks_device_from_ptr(host.data_ptr())


def test_generators_come_from_the_hooks():
    # getNewGenerator makes torch.Generator(device=...); getDefaultGenerator is what ATen's random
    # operators draw from, and torch.vdev.default_generators wraps the same generators.
    assert torch.Generator(device="vdev:1").device == torch.device("vdev:1")
    torch.vdev.init()
    g = torch.vdev.default_generators[1]
    g.manual_seed(5)
    a = torch.rand(3, device="vdev:1").cpu()
    assert g.get_offset() == 4
    g.manual_seed(5)
    assert torch.equal(torch.rand(3, device="vdev:1").cpu(), a)


GUARD_METHODS = [
    "setDevice",
    "exchangeDevice",
    "getStream",
    "getDefaultStream",
    "getDeviceCapability",
    "exchangeStream",
    "queryStream",
]


@pytest.mark.parametrize("method", GUARD_METHODS)
@pytest.mark.parametrize("device", ["cpu", "meta", "cuda:0"])
def test_guard_rejects_other_device_types_naming_them(method, device):
    torch.vdev.set_device(1)
    with pytest.raises(ValueError, match=f"expected a vdev device, got {device}"):
        rt.guard_call(method, device)
    assert torch.vdev.current_device() == 1


@pytest.mark.parametrize("method", GUARD_METHODS)
def test_guard_validates_vdev_indices(method):
    with pytest.raises(IndexError, match="device index 2 out of range"):
        rt.guard_call(method, "vdev:2")
    assert torch.vdev.current_device() == 0


def test_guard_methods_on_valid_devices():
    assert rt.guard_call("getStream", "vdev:1") == 1
    assert rt.guard_call("getDefaultStream", "vdev:1") == 1
    assert rt.guard_call("exchangeStream", "vdev:1") == 1
    assert rt.guard_call("queryStream", "vdev:0") == 1
    assert rt.guard_call("exchangeDevice", "vdev:1") == 0
    assert torch.vdev.current_device() == 1
    assert rt.guard_call("setDevice", "vdev:0") == 0
