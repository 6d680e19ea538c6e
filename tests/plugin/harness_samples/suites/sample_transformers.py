"""A test file in transformers' style: unittest classes, the device and the device operations from
transformers.testing_utils (torch_device, backend_*), gated by its decorators, fp16 and bf16
by its capability probes. Run by tests/plugin/test_harness_adapters.py in a nested pytest."""

import unittest

import torch
from transformers.testing_utils import (
    backend_device_count,
    backend_empty_cache,
    backend_manual_seed,
    backend_max_memory_allocated,
    backend_memory_allocated,
    backend_reset_peak_memory_stats,
    backend_synchronize,
    require_torch_accelerator,
    require_torch_bf16,
    require_torch_fp16,
    require_torch_multi_accelerator,
    torch_device,
)


class ModelOnAcceleratorTest(unittest.TestCase):
    @require_torch_accelerator
    def test_seeded_forward_is_reproducible(self):
        self.assertEqual(torch_device, "vdev")
        outs = []
        for _ in range(2):
            backend_manual_seed(torch_device, 0)  # the device's generator: made on the device
            model = torch.nn.Linear(8, 8, device=torch_device)
            outs.append(model(torch.randn(2, 8, device=torch_device)))
        torch.testing.assert_close(outs[0], outs[1])

    @require_torch_accelerator
    def test_memory_tables_follow_the_device(self):
        backend_reset_peak_memory_stats(torch_device)
        before = backend_memory_allocated(torch_device)
        x = torch.empty(1 << 20, dtype=torch.uint8, device=torch_device)
        backend_synchronize(torch_device)
        self.assertGreaterEqual(backend_memory_allocated(torch_device) - before, 1 << 20)
        self.assertGreaterEqual(backend_max_memory_allocated(torch_device), before + (1 << 20))
        del x
        backend_empty_cache(torch_device)
        self.assertEqual(backend_memory_allocated(torch_device), before)

    @require_torch_multi_accelerator
    def test_multi_accelerator(self):
        self.assertEqual(backend_device_count(torch_device), torch.vdev.device_count())

    @require_torch_fp16
    def test_fp16(self):
        x = torch.ones(2, 2, dtype=torch.float16, device=torch_device)
        self.assertEqual((x @ x).sum().item(), 8.0)

    @require_torch_bf16
    def test_bf16(self):
        x = torch.ones(2, 2, dtype=torch.bfloat16, device=torch_device)
        self.assertEqual((x @ x).sum().item(), 8.0)
