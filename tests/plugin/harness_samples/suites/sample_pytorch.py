"""A test file in PyTorch's own style: a generic TestCase instantiated for each device type by
instantiate_device_type_tests, vdev being PyTorch's PrivateUse1TestBase. One test is marked
@onlyCUDA though it is device-generic, one @onlyCPU, one needs two devices; the classes carry
torch 2.15's hardware classification. Run by
tests/plugin/test_harness_adapters.py in a nested pytest."""

import torch
from torch.testing._internal.common_device_type import (
    deviceCountAtLeast,
    dtypes,
    instantiate_device_type_tests,
    onlyCPU,
    onlyCUDA,
)
from torch.testing._internal.common_utils import TestCase, run_tests

try:  # torch 2.15 and later: `python this_file.py --hw-classification ACCELERATOR`
    from torch.testing._internal.common_utils import HardwareClassification
except ImportError:
    HardwareClassification = None


class TestScale(TestCase):
    if HardwareClassification is not None:
        hw_classification = HardwareClassification.ACCELERATOR

    @dtypes(torch.float32, torch.float16)
    def test_scale(self, device, dtype):
        x = torch.ones(4, device=device, dtype=dtype)
        self.assertEqual((x * 2).device, torch.device(device))
        self.assertEqual(x * 2, torch.full((4,), 2, device=device, dtype=dtype))

    @onlyCUDA
    def test_marked_cuda_but_device_generic(self, device):
        self.assertEqual(torch.arange(3, device=device).sum().item(), 3)

    @onlyCPU
    def test_cpu_only(self, device):
        self.assertEqual(torch.device(device).type, "cpu")

    @deviceCountAtLeast(2)
    def test_two_devices(self, devices):
        a = torch.ones(2, device=devices[0])
        self.assertEqual(a.to(devices[1]).device, torch.device(devices[1]))


class TestFrameworkOnly(TestCase):
    """No device: PyTorch's GENERIC classification."""

    if HardwareClassification is not None:
        hw_classification = HardwareClassification.GENERIC

    def test_no_device(self):
        self.assertEqual(torch.tensor([1, 2]).sum().item(), 3)


instantiate_device_type_tests(TestScale, globals())

if __name__ == "__main__":
    run_tests()
