"""Stand-in for transformers.testing_utils (see ../README.md): the device comes from
TRANSFORMERS_TEST_DEVICE (after importing TRANSFORMERS_TEST_BACKEND), the device operations from
tables whose "default" entry answers for a device they do not name."""

import importlib
import os
import sys
import unittest
from pathlib import Path

import torch

from .utils.import_utils import is_torch_bf16_available_on_device, is_torch_fp16_available_on_device

if "TRANSFORMERS_TEST_BACKEND" in os.environ:
    importlib.import_module(os.environ["TRANSFORMERS_TEST_BACKEND"])
if "TRANSFORMERS_TEST_DEVICE" in os.environ:
    torch_device = os.environ["TRANSFORMERS_TEST_DEVICE"]
    try:
        _ = torch.device(torch_device)
    except RuntimeError as e:
        raise RuntimeError(
            "Unknown testing device specified by environment variable "
            f"`TRANSFORMERS_TEST_DEVICE`: {torch_device}"
        ) from e
elif torch.cuda.is_available():
    torch_device = "cuda"
else:
    torch_device = "cpu"


def _device_agnostic_dispatch(device, dispatch_table, *args, **kwargs):
    fn = dispatch_table.get(device, dispatch_table["default"])
    return fn(*args, **kwargs) if callable(fn) else fn


BACKEND_MANUAL_SEED = {
    "cuda": torch.cuda.manual_seed,
    "cpu": torch.manual_seed,
    "default": torch.manual_seed,
}
BACKEND_EMPTY_CACHE = {"cuda": torch.cuda.empty_cache, "cpu": None, "default": None}
BACKEND_DEVICE_COUNT = {"cuda": torch.cuda.device_count, "cpu": lambda: 0, "default": lambda: 1}
BACKEND_MEMORY_ALLOCATED = {"cuda": torch.cuda.memory_allocated, "cpu": 0, "default": 0}
BACKEND_MAX_MEMORY_ALLOCATED = {"cuda": torch.cuda.max_memory_allocated, "cpu": 0, "default": 0}
BACKEND_RESET_MAX_MEMORY_ALLOCATED = {"cpu": None, "default": None}
BACKEND_RESET_PEAK_MEMORY_STATS = {"cpu": None, "default": None}
BACKEND_SYNCHRONIZE = {"cuda": torch.cuda.synchronize, "cpu": None, "default": None}
BACKEND_TORCH_ACCELERATOR_MODULE = {"cuda": torch.cuda, "cpu": None, "default": None}


# A spec file: imported by the module name cut from the variable at ".py", from the working
# directory (which is why the variable must be a file name there, not a path).
if "TRANSFORMERS_TEST_DEVICE_SPEC" in os.environ:
    device_spec_path = os.environ["TRANSFORMERS_TEST_DEVICE_SPEC"]
    if not Path(device_spec_path).is_file():
        raise ValueError(f"Specified path to device spec file is not a file: {device_spec_path}")
    sys.path.append(os.path.split(os.path.realpath(device_spec_path))[0])
    device_spec_module = importlib.import_module(device_spec_path[: device_spec_path.index(".py")])
    if "TRANSFORMERS_TEST_DEVICE" in os.environ and torch_device != device_spec_module.DEVICE_NAME:
        raise ValueError("TRANSFORMERS_TEST_DEVICE does not match the spec's DEVICE_NAME")
    torch_device = device_spec_module.DEVICE_NAME
    for table, name in (
        (BACKEND_MANUAL_SEED, "MANUAL_SEED_FN"),
        (BACKEND_EMPTY_CACHE, "EMPTY_CACHE_FN"),
        (BACKEND_DEVICE_COUNT, "DEVICE_COUNT_FN"),
    ):
        if hasattr(device_spec_module, name):
            table[torch_device] = getattr(device_spec_module, name)


def backend_manual_seed(device, seed):
    return _device_agnostic_dispatch(device, BACKEND_MANUAL_SEED, seed)


def backend_empty_cache(device):
    return _device_agnostic_dispatch(device, BACKEND_EMPTY_CACHE)


def backend_device_count(device):
    return _device_agnostic_dispatch(device, BACKEND_DEVICE_COUNT)


def backend_memory_allocated(device):
    return _device_agnostic_dispatch(device, BACKEND_MEMORY_ALLOCATED)


def backend_max_memory_allocated(device):
    return _device_agnostic_dispatch(device, BACKEND_MAX_MEMORY_ALLOCATED)


def backend_reset_peak_memory_stats(device):
    return _device_agnostic_dispatch(device, BACKEND_RESET_PEAK_MEMORY_STATS)


def backend_synchronize(device):
    return _device_agnostic_dispatch(device, BACKEND_SYNCHRONIZE)


def require_torch_accelerator(test_case):
    return unittest.skipUnless(torch_device != "cpu", "test requires accelerator")(test_case)


def require_torch_multi_accelerator(test_case):
    return unittest.skipUnless(
        backend_device_count(torch_device) > 1, "test requires multiple accelerators"
    )(test_case)


def require_torch_fp16(test_case):
    return unittest.skipUnless(
        is_torch_fp16_available_on_device(torch_device), "test requires device with fp16 support"
    )(test_case)


def require_torch_bf16(test_case):
    return unittest.skipUnless(
        is_torch_bf16_available_on_device(torch_device), "test requires device with bf16 support"
    )(test_case)
