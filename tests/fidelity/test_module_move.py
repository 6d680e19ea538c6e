"""Moving modules keeps parameter identity, as `.to("cuda")` does (nn.Module._apply asks
aten::_has_compatible_shallow_copy_type and then assigns `param.data`)."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F


def test_parameters_and_their_grads_keep_their_identity_both_ways():
    m = nn.Linear(3, 2)
    weight, bias = m.weight, m.bias
    m(torch.ones(1, 3)).sum().backward()
    grad = weight.grad
    m.to("vdev")
    assert m.weight is weight and m.bias is bias and weight.grad is grad
    assert weight.device.type == "vdev" and grad.device.type == "vdev"
    assert isinstance(weight, nn.Parameter) and weight.requires_grad
    m.to("cpu")
    assert m.weight is weight and weight.device.type == "cpu" and weight.grad is grad


def test_tied_weights_stay_tied():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(10, 4)
            self.out = nn.Linear(4, 10, bias=False)
            self.out.weight = self.embed.weight

    m = Tied().to("vdev")
    assert m.out.weight is m.embed.weight
    assert len(list(m.parameters())) == 1


def test_an_optimizer_built_before_the_move_trains_the_moved_parameters():
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    moved = copy.deepcopy(ref)
    x, y = torch.randn(16, 4), torch.randn(16, 1)

    def train(model, opt, dev):
        for _ in range(5):
            opt.zero_grad()
            F.mse_loss(model(x.to(dev)), y.to(dev)).backward()
            opt.step()

    train(ref, torch.optim.Adam(ref.parameters(), lr=0.1), "cpu")
    opt = torch.optim.Adam(moved.parameters(), lr=0.1)  # built before the move
    moved.to("vdev")
    train(moved, opt, "vdev")
    for a, b in zip(ref.parameters(), moved.parameters(), strict=True):
        assert b.device.type == "vdev"
        torch.testing.assert_close(b.cpu(), a)


def test_a_lazy_module_moved_before_materialisation_runs():
    m = nn.LazyLinear(3).to("vdev")
    out = m(torch.ones(2, 5, device="vdev"))
    assert out.device.type == "vdev" and m.weight.device.type == "vdev"
    assert m.weight.shape == (3, 5)


def test_a_lazy_module_moved_with_its_device_method_runs():
    # As LazyLinear(3).cuda(): UninitializedParameter let only torch.Tensor.cuda (and .to, .cpu)
    # through, so .vdev() raised "Attempted to use an uninitialized parameter".
    m = nn.LazyLinear(3).vdev()
    assert m.weight.device == torch.device("vdev:0")
    out = m(torch.ones(2, 5, device="vdev"))
    assert out.device.type == "vdev" and m.weight.shape == (3, 5)
    m1 = nn.LazyConv2d(4, 3).vdev(1)
    assert m1(torch.ones(1, 2, 5, 5, device="vdev:1")).shape == (1, 4, 3, 3)


def test_assigning_data_across_cpu_and_vdev():
    p = nn.Parameter(torch.ones(3))
    p.data = torch.arange(3.0, device="vdev")
    assert p.device.type == "vdev" and p.requires_grad
    assert torch.equal(p.cpu(), torch.arange(3.0))
    (p * 2).sum().backward()
    assert torch.equal(p.grad.cpu(), torch.full((3,), 2.0))
    p.data = torch.zeros(3)
    assert p.device.type == "cpu"


def test_compatibility_is_reported_as_for_cuda():
    cpu, vdev = torch.ones(2), torch.ones(2, device="vdev")
    assert torch._has_compatible_shallow_copy_type(cpu, vdev)
    assert torch._has_compatible_shallow_copy_type(vdev, cpu)
    assert torch._has_compatible_shallow_copy_type(vdev, vdev)
    # A sparse tensor is not a dense one, on CUDA as on vdev.
    assert not torch._has_compatible_shallow_copy_type(vdev, torch.ones(2).to_sparse())
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        nn.Parameter(torch.ones(2, device="vdev")).data = torch.ones(2).to_sparse()
