"""A test file in diffusers' style: the device and device operations from the suite's own
testing_utils (diffusers' tests/testing_utils.py). Run by tests/plugin/test_harness_adapters.py."""

import torch
from testing_utils import (
    backend_manual_seed,
    backend_max_memory_allocated,
    backend_reset_peak_memory_stats,
    backend_synchronize,
    require_torch_accelerator,
    torch_device,
)


@require_torch_accelerator
def test_a_denoising_step_on_the_accelerator():
    assert torch_device == "vdev"
    backend_reset_peak_memory_stats(torch_device)
    backend_manual_seed(torch_device, 0)
    noise = torch.randn(1, 4, 8, 8, device=torch_device)
    conv = torch.nn.Conv2d(4, 4, 3, padding=1).to(torch_device)
    sample = noise - 0.1 * conv(noise)
    backend_synchronize(torch_device)
    assert sample.device.type == "vdev"
    assert backend_max_memory_allocated(torch_device) >= noise.numel() * 4
