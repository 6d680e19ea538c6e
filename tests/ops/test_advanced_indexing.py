"""Advanced indexing as CUDA does it: a boolean mask becomes its nonzero() indices at the call
(ATen's expandTensors), so the result's shape and every check of it are decided on the host with
the mask's own values, never from a plan cached for another mask of the same shape; masks that
index_put_ turns into masked_fill_ are queued without a wait, as on CUDA. TorchScript's indexing
reaches vdev with lists of its own type and works as eager indexing does.
(cpp/backend/checks/index_masks.h, cpp/backend/common/optional_tensor_lists.h,
cpp/backend/executor/launch_plan.h: returns_from_cpu_values)"""

import warnings

import pytest
import torch
from asyncutil import gated, run_bounded

DEV = "vdev"


@pytest.mark.parametrize("mask_device", ["cpu", DEV])
@pytest.mark.parametrize("order", [(3, 1), (1, 3), (2, 2, 0, 4)])
def test_a_mask_selects_its_own_elements_whatever_masks_of_its_shape_came_before(
    mask_device, order
):
    # Masks of one shape selecting 3, then 1 element: before, the second call reused the first
    # call's output size (3 elements, a resize warning), or failed the other way round.
    x = torch.arange(4.0, device=DEV)
    for count in order:
        mask = torch.tensor([i < count for i in range(4)], device=mask_device)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no resize warning either
            got = x[mask]
        assert got.cpu().tolist() == [float(i) for i in range(count)]


def test_a_cpu_mask_indexes_asynchronously():
    x = torch.arange(6.0, device=DEV)
    s = torch.vdev.current_stream()
    out = {}
    with gated(s):
        # Bounded: a call that waited for the stream would never return behind the gate.
        assert run_bounded(lambda: out.setdefault("y", x[torch.tensor([True, False] * 3)]))
        assert out["y"].shape == (3,)  # known on the host from the CPU mask, as on CUDA
        assert not s.query()  # the gather is queued behind the gate
    assert out["y"].cpu().tolist() == [0.0, 2.0, 4.0]


def test_a_cpu_mask_index_of_every_count_matches_cpu():
    torch.manual_seed(0)
    for _ in range(20):
        x = torch.randn(5, 3)
        mask = torch.rand(5, 3) > 0.5
        torch.testing.assert_close(x.to(DEV)[mask].cpu(), x[mask])
        torch.testing.assert_close(x.to(DEV)[mask.any(1)].cpu(), x[mask.any(1)])


@pytest.mark.parametrize("mask_device", ["cpu", DEV])
def test_a_value_of_the_wrong_shape_raises_at_the_call(mask_device):
    a = torch.zeros(4, 3, device=DEV)
    mask = torch.tensor([True, True, False, False], device=mask_device)
    with pytest.raises(
        RuntimeError,
        match=r"shape mismatch: value tensor of shape \[3, 3\] cannot be broadcast to "
        r"indexing result of shape \[2, 3\]",
    ):
        a[mask] = torch.ones(3, 3, device=DEV)
    torch.vdev.synchronize()  # nothing was queued that fails later
    assert a.cpu().eq(0).all()
    a[mask] = torch.ones(2, 3, device=DEV)  # the right shape, same signature as before
    assert a.sum().item() == 6


def test_index_tensors_that_do_not_broadcast_raise_at_the_call():
    a = torch.zeros(3, 3, device=DEV)
    with pytest.raises(
        IndexError,
        match=r"shape mismatch: indexing tensors could not be broadcast together with shapes "
        r"\[2\], \[3\]",
    ):
        a[[0, 1], [0, 1, 2]] = 0
    with pytest.raises(IndexError, match=r"could not be broadcast together"):
        a[[0, 1], [0, 1, 2]]
    torch.vdev.synchronize()


def test_a_mask_of_the_wrong_shape_raises_cpus_index_error_at_the_call():
    b = torch.zeros(4, 4, device=DEV)
    with pytest.raises(
        IndexError,
        match=r"The shape of the mask \[4, 3\] at index 1 does not match the shape of the "
        r"indexed tensor \[4, 4\] at index 1",
    ):
        b[torch.ones(4, 3, dtype=torch.bool, device=DEV)] = torch.ones(12, device=DEV)
    torch.vdev.synchronize()


def test_the_uint8_index_deprecation_warns_at_the_call():
    a = torch.zeros(3, device=DEV)
    mask = torch.tensor([1, 0, 1], dtype=torch.uint8, device=DEV)
    for index in (lambda: a[mask], lambda: a.__setitem__(mask, torch.ones(2, device=DEV))):
        with pytest.warns(UserWarning, match="indexing with dtype torch.uint8 is now deprecated"):
            index()
    torch.vdev.synchronize()
    assert a.cpu().tolist() == [1.0, 0.0, 1.0]


def test_a_one_element_value_through_a_mask_is_masked_fill_and_never_waits():
    # CUDA turns x[mask] = scalar into masked_fill_ (no nonzero, no wait); so does vdev.
    a = torch.arange(4.0, device=DEV)
    mask = a > 1
    eight = torch.tensor(8.0, device=DEV)
    torch.vdev.set_sync_debug_mode("error")
    try:
        a[mask] = 7.0
        a[mask] = eight
    finally:
        torch.vdev.set_sync_debug_mode(0)
    assert a.cpu().tolist() == [0.0, 1.0, 8.0, 8.0]
    with pytest.raises(RuntimeError, match="masked_fill_ only supports boolean masks"):
        a[mask.to(torch.uint8)] = 1.0  # as on CPU and CUDA: masked_fill_ rejects a uint8 mask


def test_empty_tensors_never_overlap():
    # The backward of t[mask] = x[mask] with nothing selected (a box loss without boxes).
    x = torch.zeros(0, device=DEV)
    m = torch.zeros(0, dtype=torch.bool, device=DEV)
    x.index_put_((m,), torch.zeros(0, device=DEV))
    x.index_put_((m,), torch.zeros(0, device=DEV), accumulate=True)
    t = torch.zeros(0, 4, device=DEV, requires_grad=True)
    sel = torch.zeros(0, dtype=torch.bool, device=DEV)
    out = torch.zeros(0, 4, device=DEV)
    out[sel] = t[sel] * 2
    out.sum().backward()
    torch.vdev.synchronize()
    assert t.grad.shape == (0, 4)


@torch.jit.script
def _script_index(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    return x[i]


@torch.jit.script
def _script_set(x: torch.Tensor, m: torch.Tensor, v: float) -> torch.Tensor:
    x[m] = v
    return x


@torch.jit.script
def _script_set_tensor(x: torch.Tensor, i: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    x[i] = v
    return x


@pytest.mark.parametrize(
    "index",
    [
        torch.tensor([True, False, True, False]),
        torch.tensor([0, 2]),
        torch.tensor([[3, 1], [0, 0]]),
    ],
    ids=["mask", "indices", "2-d indices"],
)
@pytest.mark.parametrize("index_device", ["cpu", DEV])
def test_torchscript_indexing_works_as_eager_indexing(index, index_device):
    # Before: "indices should be either on cpu or on the same device as the indexed tensor (cpu)"
    # and "Could not run 'aten::_copy_from_and_resize' with arguments from the 'CPU' backend".
    x = torch.arange(4.0)
    i = index.to(index_device)
    assert torch.equal(_script_index(x.to(DEV), i).cpu(), x[index])
    expected = x.clone()
    expected[index] = 9.0
    assert torch.equal(_script_set(x.to(DEV), i, 9.0).cpu(), expected)
    value = torch.full(x[index].shape, 5.0)
    expected = x.clone()
    expected[index] = value
    got = _script_set_tensor(x.to(DEV), i, value.to(DEV))
    assert torch.equal(got.cpu(), expected)
