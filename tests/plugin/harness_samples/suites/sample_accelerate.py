"""A test file in accelerate's style: unittest classes, the device and its count from
accelerate.test_utils, gated by its decorators. Run by tests/plugin/test_harness_adapters.py in
a nested pytest, against the stand-ins (../standins) or the real accelerate."""

import unittest

import torch
from accelerate.state import PartialState
from accelerate.test_utils import (
    device_count,
    memory_allocated_func,
    require_multi_device,
    require_non_cpu,
    require_single_device,
    torch_device,
)
from accelerate.test_utils.testing import get_backend


class AcceleratorDeviceTest(unittest.TestCase):
    @require_non_cpu
    def test_a_model_runs_on_the_accelerator(self):
        self.assertEqual(torch_device, "vdev")
        model = torch.nn.Linear(8, 8).to(torch_device)
        out = model(torch.randn(4, 8, device=torch_device))
        self.assertEqual(out.device.type, "vdev")
        self.assertGreaterEqual(memory_allocated_func(), out.numel() * out.element_size())

    @require_non_cpu
    def test_accelerate_puts_models_on_the_accelerator(self):
        # Where Accelerator, Trainer and the offload hooks put models (PartialState(cpu=True) is
        # still the CPU: the adapter replaces the default, not ACCELERATE_TORCH_DEVICE's choice).
        self.assertEqual(PartialState().default_device, torch.device(torch_device))

    @require_single_device
    def test_single_device(self):
        self.assertEqual(device_count, 1)

    @require_multi_device
    def test_multi_device(self):
        self.assertEqual(device_count, torch.vdev.device_count())
        x = torch.ones(3, device=f"{torch_device}:1")
        self.assertEqual((x + x.to(f"{torch_device}:0").to(x.device)).sum().item(), 6.0)

    def test_get_backend_names_the_same_device(self):
        self.assertEqual(get_backend()[:2], (torch_device, device_count))
