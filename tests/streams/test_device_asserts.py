"""Sticky device-side asserts (cpp/runtime/device_assert.h): a queued kernel that fails where
CUDA's kernel has a device-side assert makes its device unusable for the rest of the process, as a
CUDA context is after "device-side assert triggered"; other failures, other devices and
VDEV_STICKY_ASSERTS=0 are not affected. tests/conftest.py makes every device usable again after
each test (as the pytest plugin does for a library's tests)."""

import pytest
import torch
import torch.nn.functional as F
from asyncutil import failing_operator, gated

import torch_vdev._C as C
from child_process import run_python

DEV = "vdev"


def v(t: torch.Tensor, device: str = DEV) -> torch.Tensor:
    return t.to(device)


# Each queues an operator whose CUDA kernel asserts on this data (the source of each is named in
# cpp/backend/common/device_asserts.cpp); CPU's kernel raises for it on the worker.
ASSERTING = {
    "index_select": lambda: v(torch.ones(3)).index_select(0, v(torch.tensor([5]))),
    "embedding": lambda: F.embedding(v(torch.tensor([7])), v(torch.ones(3, 2))),
    "advanced index": lambda: v(torch.ones(3))[v(torch.tensor([5]))],
    "index_put_": lambda: v(torch.ones(3)).index_put_((v(torch.tensor([5])),), v(torch.ones(1))),
    "gather": lambda: v(torch.ones(3)).gather(0, v(torch.tensor([5]))),
    "scatter_add": lambda: v(torch.ones(3)).scatter_add(0, v(torch.tensor([5])), v(torch.ones(1))),
    "one_hot": lambda: F.one_hot(v(torch.tensor([5])), 3),
    "take": lambda: v(torch.ones(3)).take(v(torch.tensor([5]))),
    "nll_loss": lambda: F.nll_loss(v(torch.zeros(2, 3)), v(torch.tensor([0, 5]))),
    "cross_entropy": lambda: F.cross_entropy(v(torch.zeros(2, 3)), v(torch.tensor([0, 5]))),
    "binary_cross_entropy": lambda: F.binary_cross_entropy(
        v(torch.tensor([1.5])), v(torch.tensor([1.0]))
    ),
    "bernoulli": lambda: torch.bernoulli(v(torch.tensor([1.5]))),
    "multinomial": lambda: torch.multinomial(v(torch.tensor([-1.0, 2.0])), 1),
    "_assert_async": lambda: torch._assert_async(v(torch.tensor(0))),
}


@pytest.mark.parametrize("name", sorted(ASSERTING))
def test_a_device_side_assert_raises_accelerator_error_then_every_later_operation_does(name):
    x = torch.ones(2, device="vdev:0")
    ASSERTING[name]()
    with pytest.raises(torch.AcceleratorError) as first:
        torch.vdev.synchronize()
    assert first.value.error_code == 710  # cudaErrorAssert
    assert str(first.value).startswith("vdev error: device-side assert triggered: [aten::")
    assert "(on vdev:0 stream 0)" in str(first.value)
    failure = C._device_assert_failure(0)
    assert failure is not None and failure in str(first.value)
    # Unusable until the process ends: launches, copies, synchronizes, on any stream.
    torch.empty(2, device="vdev:0")  # allocating alone launches nothing: it works, as on CUDA
    with pytest.raises(torch.AcceleratorError, match="device-side assert triggered") as later:
        (x + 1).cpu()
    assert failure in str(later.value)  # names the first failure and its stream
    with torch.vdev.stream(torch.vdev.Stream()):
        with pytest.raises(torch.AcceleratorError, match="unusable since"):
            x.mul_(2)
    with pytest.raises(torch.AcceleratorError, match="unusable since"):
        torch.vdev.synchronize()
    with pytest.raises(torch.AcceleratorError, match="unusable since"):
        torch.tensor([1.0]).to("vdev:0")
    # Other devices keep working.
    assert (torch.ones(2, device="vdev:1") + 1).cpu().tolist() == [2.0, 2.0]
    # What only vdev can do: make it usable again (the pytest plugin does between tests).
    assert C._clear_device_assert(0) == failure
    assert (x + 1).cpu().tolist() == [2.0, 2.0]


def test_the_assert_is_raised_once_with_its_operator_then_the_lasting_error_names_it():
    ones = torch.ones(3, device=DEV)
    far = torch.tensor([5], device=DEV)
    with gated(torch.vdev.current_stream()):
        ones.index_select(0, far)
        ones.index_select(0, far)  # also fails: listed with the first
    with pytest.raises(torch.AcceleratorError, match=r"\[aten::index_select\] index out of range"):
        ones.cpu()
    with pytest.raises(torch.AcceleratorError, match="unusable since") as lasting:
        ones.cpu()
    assert "1 later error(s)" not in str(lasting.value)


def test_a_failure_cuda_raises_on_the_host_is_not_sticky():
    lib = failing_operator("vdev_not_an_assert")
    x = torch.ones(3, device=DEV)
    torch.ops.vdev_not_an_assert.boom(x)
    with pytest.raises(RuntimeError, match="boom") as failed:  # once, not as an assert
        torch.vdev.synchronize()
    assert not isinstance(failed.value, torch.AcceleratorError)
    assert C._device_assert_failure(0) is None
    assert (x + 1).cpu().tolist() == [2.0] * 3
    lib._destroy()


def test_an_out_of_memory_error_is_not_sticky():
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(1 << 50, dtype=torch.uint8, device=DEV)
    assert C._device_assert_failure(0) is None
    assert (torch.ones(2, device=DEV) + 1).cpu().tolist() == [2.0, 2.0]


def test_an_event_recorded_after_the_assert_cannot_be_recorded():
    ones = torch.ones(3, device=DEV)
    ones.index_select(0, torch.tensor([5], device=DEV))
    with pytest.raises(torch.AcceleratorError):
        torch.vdev.synchronize()
    with pytest.raises(torch.AcceleratorError, match="unusable since"):
        torch.vdev.Event().record()


def test_without_sticky_asserts_the_device_recovers_and_the_kernels_type_is_raised():
    done = run_python(
        """
import torch, torch_vdev
x = torch.ones(3, device="vdev")
x.index_select(0, torch.tensor([5], device="vdev"))
try:
    torch.vdev.synchronize()
except IndexError as e:
    print("first:", "device-side assert" in str(e))
print("then:", (x + 1).cpu().tolist())
""",
        env={"VDEV_STICKY_ASSERTS": "0"},
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "first: False" in out and "then: [2.0, 2.0, 2.0]" in out
