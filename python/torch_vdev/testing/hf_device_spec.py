"""Hugging Face's device spec for vdev: what transformers' and diffusers' test harnesses call for
a third-party device (``TRANSFORMERS_TEST_DEVICE_SPEC``, ``DIFFUSERS_TEST_DEVICE_SPEC``).

Their loaders import the spec by module name, cut from the variable at its first ``.py``, from
the working directory (``importlib.import_module``): the variable must be a file name in the
directory the suite runs from, not a path (``docs/testing-your-library.md`` gives the line that
copies this file there). With torch_vdev's pytest plugin no spec file is needed: the plugin names
the device, and ``torch_vdev.testing.huggingface`` fills the harnesses' device tables from this
module, including the memory and synchronization tables a spec file cannot fill.

transformers reads ``DEVICE_NAME``, ``MANUAL_SEED_FN``, ``EMPTY_CACHE_FN``, ``DEVICE_COUNT_FN``;
diffusers reads ``DEVICE_NAME`` and ``SUPPORTS_TRAINING``; the other names are the adapter's.
"""

import torch

from torch_vdev.testing import DEVICE  # imports torch_vdev: the spec works with autoloading off

DEVICE_NAME = DEVICE

# As transformers' tables have torch.cuda.manual_seed for "cuda": the current device's generator.
MANUAL_SEED_FN = torch.vdev.manual_seed
EMPTY_CACHE_FN = torch.vdev.empty_cache
DEVICE_COUNT_FN = torch.vdev.device_count
SUPPORTS_TRAINING = True

MEMORY_ALLOCATED_FN = torch.vdev.memory_allocated
MAX_MEMORY_ALLOCATED_FN = torch.vdev.max_memory_allocated
RESET_MAX_MEMORY_ALLOCATED_FN = torch.vdev.reset_max_memory_allocated
RESET_PEAK_MEMORY_STATS_FN = torch.vdev.reset_peak_memory_stats
SYNCHRONIZE_FN = torch.vdev.synchronize
ACCELERATOR_MODULE = torch.vdev
