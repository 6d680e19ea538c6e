"""A test file in PyTorch's own style: a generic TestCase instantiated for each device type by
instantiate_device_type_tests, vdev being PyTorch's PrivateUse1TestBase. One test is marked
@onlyCUDA though it is device-generic, one @onlyCPU, one needs two devices. Run by
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


class TestScale(TestCase):
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


instantiate_device_type_tests(TestScale, globals())

if __name__ == "__main__":
    run_tests()
