"""torch.vdev device management: the public API and its validation."""

import threading

import pytest
import torch


def test_availability_and_count(device_count):
    assert torch.vdev.is_available()
    assert device_count == 2  # the suite runs with the default configuration
    assert torch.vdev.current_device() == 0


@pytest.mark.parametrize("spec", [1, "vdev:1", torch.device("vdev", 1), torch.device("vdev:1")])
def test_set_device_accepts_every_spelling(spec):
    torch.vdev.set_device(spec)
    assert torch.vdev.current_device() == 1
    assert torch.accelerator.current_device_index() == 1


INVALID_SPECS = [
    (2, IndexError, "device index 2 out of range: 2 vdev devices (0..1)"),
    (127, IndexError, "out of range"),
    (2**40, IndexError, "out of range"),
    (-1, ValueError, "device index -1 is negative"),
    ("vdev:5", IndexError, "device index 5 out of range"),
    ("vdev", ValueError, "expected a vdev device with an index"),
    ("vdev:x", ValueError, "invalid vdev device string 'vdev:x'"),
    ("cuda:0", ValueError, "expected a vdev device, got 'cuda:0'"),
    (torch.device("cpu"), ValueError, "expected a vdev device, got 'cpu'"),
    (torch.device("vdev", 3), IndexError, "device index 3 out of range"),
    (1.0, TypeError, "got float"),
    ([1], TypeError, "got list"),
    (None, TypeError, "got NoneType"),
    (True, TypeError, "got bool"),
    ("vdev:256", IndexError, "device index 256 out of range"),  # not wrapped to 8 bits
    ("vdev:255", IndexError, "device index 255 out of range"),
    (torch.tensor(1), TypeError, "got Tensor"),
]


@pytest.mark.parametrize("spec,exc,needle", INVALID_SPECS)
def test_set_device_rejects_bad_input_and_keeps_state(spec, exc, needle):
    torch.vdev.set_device(1)
    with pytest.raises(exc) as info:
        torch.vdev.set_device(spec)
    assert needle in str(info.value)
    assert "[set_device]" in str(info.value)
    assert torch.vdev.current_device() == 1


def test_device_context_manager_restores_previous_device():
    with torch.vdev.device(1):
        assert torch.vdev.current_device() == 1
        with torch.vdev.device("vdev:0"):
            assert torch.vdev.current_device() == 0
        assert torch.vdev.current_device() == 1
    assert torch.vdev.current_device() == 0


def test_device_context_manager_restores_when_body_raises():
    with pytest.raises(KeyError):
        with torch.vdev.device(1):
            raise KeyError("boom")
    assert torch.vdev.current_device() == 0


@pytest.mark.parametrize("spec", [None, -1])
def test_device_context_manager_none_is_a_noop(spec):
    torch.vdev.set_device(1)
    with torch.vdev.device(spec):
        assert torch.vdev.current_device() == 1
    assert torch.vdev.current_device() == 1


def test_device_context_manager_invalid_index_raises_on_enter_and_keeps_state():
    cm = torch.vdev.device(9)
    with pytest.raises(IndexError, match="device index 9 out of range"):
        with cm:
            pytest.fail("body must not run")
    assert torch.vdev.current_device() == 0


def test_device_of_follows_tensor_device():
    t = torch.zeros(1, device="vdev:1")
    with torch.vdev.device_of(t):
        assert torch.vdev.current_device() == 1
    with torch.vdev.device_of(torch.zeros(1)):
        assert torch.vdev.current_device() == 0


def test_properties_and_name(device_count):
    for i in range(device_count):
        p = torch.vdev.get_device_properties(i)
        assert p.name == torch.vdev.get_device_name(i) == f"vdev virtual device {i}"
        assert p.total_memory == 4 << 30
        assert torch.vdev.get_device_capability(i) == (p.major, p.minor)
        assert "total_memory=4096MB" in repr(p)
    torch.vdev.set_device(1)
    assert torch.vdev.get_device_name() == "vdev virtual device 1"
    assert torch.vdev.get_device_properties("vdev:0").name == "vdev virtual device 0"
    with pytest.raises(IndexError, match=r"\[get_device_properties\] device index 2 out of range"):
        torch.vdev.get_device_properties(2)
    with pytest.raises(ValueError, match="expected a vdev device"):
        torch.vdev.get_device_name("cpu")


def test_synchronize_validates_device():
    torch.vdev.synchronize()
    torch.vdev.synchronize(1)
    torch.vdev.synchronize("vdev:1")
    torch.accelerator.synchronize("vdev:1")
    with pytest.raises(IndexError, match=r"\[synchronize\] device index 4 out of range"):
        torch.vdev.synchronize(4)


def test_current_device_is_per_thread():
    torch.vdev.set_device(1)
    seen = {}

    def worker():
        seen["start"] = torch.vdev.current_device()
        torch.vdev.set_device(1)
        torch.vdev.set_device(0)
        seen["end"] = torch.vdev.current_device()

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == {"start": 0, "end": 0}
    assert torch.vdev.current_device() == 1


def test_low_level_exchange_functions():
    from torch_vdev import _C

    assert _C._exchange_device(1) == 0
    assert _C._maybe_exchange_device(-1) == 1  # -1: no change, returns the current device
    assert _C._get_device() == 1
    assert _C._maybe_exchange_device(0) == 1
    with pytest.raises(ValueError, match="negative"):
        _C._exchange_device(-1)
    with pytest.raises(ValueError, match="negative"):
        _C._maybe_exchange_device(-2)
    with pytest.raises(IndexError, match=r"\[maybe_exchange_device\] device index 2 out of range"):
        _C._maybe_exchange_device(2)
    assert _C._get_device() == 0


def test_tensor_and_module_methods_are_generated():
    t = torch.ones(2)
    v = t.vdev(1)
    assert v.is_vdev and not t.is_vdev
    assert v.device == torch.device("vdev", 1)
    assert t.vdev().device == torch.device("vdev", 0)
    m = torch.nn.Linear(2, 2).vdev(1)
    assert all(p.device == torch.device("vdev", 1) for p in m.parameters())
    s = torch.ones(3).untyped_storage().vdev(1)
    assert s.is_vdev and s.device == torch.device("vdev", 1)


def test_device_arguments_accept_numpy_integers_as_torch_cuda_does():
    import numpy as np

    torch.vdev.set_device(np.int64(1))
    assert torch.vdev.current_device() == 1
    with torch.vdev.device(np.int32(0)):
        assert torch.vdev.current_device() == 0
    assert torch.vdev.current_device() == 1
    x = torch.ones(4, device="vdev:1")
    assert torch.vdev.memory_allocated(np.int64(1)) >= x.nbytes
    assert torch.vdev.current_stream(np.int64(1)).device_index == 1
    with pytest.raises(IndexError, match=r"\[set_device\] device index 7 out of range"):
        torch.vdev.set_device(np.int8(7))
    with pytest.raises(TypeError, match="got numpy.float32"):
        torch.vdev.set_device(np.float32(1))
    with pytest.raises(ValueError, match="device index -1 is negative"):
        torch.vdev.set_device(np.int64(-1))
    with pytest.raises(IndexError, match="device index 255 out of range"):
        torch.vdev.synchronize("vdev:255")
    assert torch.vdev.current_device() == 1


def test_can_device_access_peer():
    assert torch.vdev.can_device_access_peer(0, 1)
    assert torch.vdev.can_device_access_peer("vdev:1", torch.device("vdev:0"))
    with pytest.raises(IndexError, match="device index 5 out of range: 2 vdev devices"):
        torch.vdev.can_device_access_peer(0, 5)
    with pytest.raises(IndexError, match="device index -1 out of range"):
        torch.vdev.can_device_access_peer(-1, 0)
