"""A test file in timm's style: the device comes from the TORCH_DEVICE variable (timm's
tests/test_models.py, test_layers.py read it, CPU when unset; test_optim.py, CUDA). Run by
tests/plugin/test_harness_adapters.py in a nested pytest, with TORCH_DEVICE=vdev."""

import os

import pytest
import torch

torch_device = os.environ.get("TORCH_DEVICE", "cpu")


@pytest.mark.parametrize("batch", [1, 3])
def test_a_block_forward_and_backward(batch):
    block = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.GELU()
    ).to(torch_device)
    x = torch.randn(batch, 3, 16, 16, device=torch_device)
    out = block(x)
    out.mean().backward()
    assert out.device.type == torch.device(torch_device).type == "vdev"
    assert block[0].weight.grad is not None and not torch.isnan(block[0].weight.grad).any()
