"""The harness part of a suite in diffusers' style: diffusers keeps it in its repository's
tests/testing_utils.py, not in the package. The device comes from DIFFUSERS_TEST_DEVICE (after
importing DIFFUSERS_TEST_BACKEND), the device operations from the device's own torch module
(torch.get_device_module, as diffusers' TorchDeviceBackend does)."""

import importlib
import os

import pytest
import torch

if "DIFFUSERS_TEST_BACKEND" in os.environ:
    importlib.import_module(os.environ["DIFFUSERS_TEST_BACKEND"])
if "DIFFUSERS_TEST_DEVICE" in os.environ:
    torch_device = os.environ["DIFFUSERS_TEST_DEVICE"]
    try:
        _ = torch.device(torch_device)
    except RuntimeError as e:
        raise RuntimeError(
            "Unknown testing device specified by environment variable "
            f"`DIFFUSERS_TEST_DEVICE`: {torch_device}"
        ) from e
else:
    torch_device = "cuda" if torch.cuda.is_available() else "cpu"

require_torch_accelerator = pytest.mark.skipif(
    torch_device == "cpu", reason="test requires a hardware accelerator"
)


def _module(device):
    return torch.get_device_module(torch.device(device).type)


def backend_manual_seed(device, seed):
    _module(device).manual_seed(seed)


def backend_synchronize(device):
    _module(device).synchronize()


def backend_max_memory_allocated(device):
    return _module(device).max_memory_allocated(torch.device(device).index)


def backend_reset_peak_memory_stats(device):
    _module(device).reset_peak_memory_stats(torch.device(device).index)
