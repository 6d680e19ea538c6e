"""The PyTorch features that save and restore device RNG state: torch.random.fork_rng and
torch.utils.checkpoint (both call torch.vdev.get_rng_state / set_rng_state)."""

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def test_fork_rng_restores_every_device():
    torch.manual_seed(0)
    torch.rand(3, device="vdev:1")  # the devices' states differ
    before = torch.vdev.get_rng_state_all()
    cpu_before = torch.get_rng_state()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "you have 2 available devices" (as for CUDA)
        with torch.random.fork_rng(device_type="vdev"):
            torch.manual_seed(123)
            torch.rand(10, device="vdev:0")
            torch.randn(10, device="vdev:1")
    after = torch.vdev.get_rng_state_all()
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert torch.equal(torch.get_rng_state(), cpu_before)


def test_fork_rng_with_explicit_devices_replays_numbers():
    torch.manual_seed(4)
    with torch.random.fork_rng(devices=[1], device_type="vdev"):
        inside = torch.randn(5, device="vdev:1").cpu()
    assert torch.equal(torch.randn(5, device="vdev:1").cpu(), inside)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 16)

    def forward(self, x):
        return self.b(F.dropout(torch.relu(self.a(x)), 0.5, training=True))


def run(model, x, mode, preserve_rng_state=True):
    model.zero_grad()
    torch.manual_seed(7)
    if mode == "plain":
        y = model(x)
    else:
        y = checkpoint(
            model, x, use_reentrant=(mode == "reentrant"), preserve_rng_state=preserve_rng_state
        )
    y.sum().backward()
    return y.detach().cpu(), [p.grad.cpu() for p in model.parameters()]


@pytest.mark.parametrize("mode", ["reentrant", "non_reentrant"])
def test_checkpoint_recomputes_dropout_bit_for_bit(mode):
    # Backward recomputes the forward; unless checkpoint restored vdev's RNG state, the recomputed
    # dropout masks would differ and the gradients with them.
    torch.manual_seed(0)
    model = Block().to("vdev")
    x = torch.randn(8, 16, device="vdev", requires_grad=True)
    y_ref, g_ref = run(model, x, "plain")
    y, g = run(model, x, mode)
    assert torch.equal(y, y_ref)
    assert all(torch.equal(a, b) for a, b in zip(g, g_ref, strict=True))


@pytest.mark.parametrize("mode", ["reentrant", "non_reentrant"])
def test_checkpoint_without_preserving_rng_state_differs(mode):
    # The control: with preserve_rng_state=False the recomputed masks are new draws, which shows
    # the test above can fail.
    torch.manual_seed(0)
    model = Block().to("vdev")
    x = torch.randn(8, 16, device="vdev", requires_grad=True)
    _, g_ref = run(model, x, "plain")
    _, g = run(model, x, mode, preserve_rng_state=False)
    assert not all(torch.equal(a, b) for a, b in zip(g, g_ref, strict=True))
