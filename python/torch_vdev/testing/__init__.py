"""Plugging vdev into the test harnesses libraries already have (docs/testing-your-library.md).

torch_vdev's pytest plugin (``--vdev``, ``vdev = true``) calls ``enable()`` before a suite's
conftests are imported; without pytest (``python -m unittest``, a harness's own runner) a
conftest or the runner's first lines can call it (the variables of ``environment()`` set by hand
reach transformers and diffusers, not accelerate's and PEFT's device ladders). What it does, for
each harness:

* **Hugging Face transformers and diffusers**: sets ``TRANSFORMERS_TEST_DEVICE``,
  ``DIFFUSERS_TEST_DEVICE`` (and their ``*_TEST_BACKEND``, which import torch_vdev where autoloading
  is off) to ``vdev`` when unset; ``huggingface`` fills transformers' device tables.
* **accelerate and PEFT**: ``huggingface`` makes their harness (``get_backend()``,
  ``torch_device``, ``require_*``) see vdev, and ``PartialState``'s default device (``Accelerator``,
  transformers' ``Trainer``) and PEFT's ``infer_device()`` be vdev, unless
  ``ACCELERATE_TORCH_DEVICE`` names another device.
* **PyTorch's harness** (``instantiate_device_type_tests``): nothing is needed, vdev is its
  ``PrivateUse1TestBase``; ``bypass_device_restrictions()`` is its switch that runs the tests
  marked ``@onlyCUDA`` (and every ``@onlyOn``) on vdev too.

``python -m torch_vdev.testing`` prints the variables (``env``) or the path of the device spec
file Hugging Face's harnesses import (``hf-spec``).

Thread rules: call from the thread that configures the run, before the suite imports its harness.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DEVICE = "vdev"

# Each harness's own variable, and what vdev sets it to when it is unset.
ENVIRONMENT: dict[str, str] = {
    "TRANSFORMERS_TEST_DEVICE": DEVICE,
    "TRANSFORMERS_TEST_BACKEND": "torch_vdev",
    "DIFFUSERS_TEST_DEVICE": DEVICE,
    "DIFFUSERS_TEST_BACKEND": "torch_vdev",
}


def environment() -> dict[str, str]:
    """The variables that make the harnesses use vdev, as ``enable()`` sets them."""
    return dict(ENVIRONMENT)


def hf_spec_path() -> Path:
    """The device spec file of Hugging Face's harnesses (``*_TEST_DEVICE_SPEC``), in the wheel."""
    return Path(__file__).resolve().parent / "hf_device_spec.py"


def enable() -> dict[str, str]:
    """Sets each harness variable that is unset, installs the Hugging Face adapters, and returns
    the variables it set (those already set are the user's choice, and win)."""
    set_now = {}
    for variable, value in ENVIRONMENT.items():
        if variable not in os.environ:
            os.environ[variable] = value
            set_now[variable] = value
    from torch_vdev.testing import huggingface

    huggingface.install()
    return set_now


# The harness modules that read a variable once, at their import: set after that, it is too late.
_READ_AT_IMPORT = {"TRANSFORMERS_TEST_DEVICE": ("transformers.testing_utils", "torch_device")}


def read_before_set(set_now: dict[str, str]) -> list[str]:
    """The variables of ``set_now`` (what ``enable()`` set) that a harness read before they were
    set: a message for each, naming the module and what it read."""
    late = []
    for variable, (module_name, attribute) in _READ_AT_IMPORT.items():
        module = sys.modules.get(module_name)
        if variable in set_now and module is not None:
            read = getattr(module, attribute, None)
            if read != set_now[variable]:
                late.append(
                    f"{variable}={set_now[variable]}: {module_name} was imported before it was "
                    f"set, and its {attribute} is {read!r}"
                )
    return late


def bypass_device_restrictions() -> None:
    """PyTorch's switch for a PrivateUse1 backend: ``PrivateUse1TestBase.bypass_device_restrictions
    = True`` makes every ``@onlyOn`` decorator (``@onlyCUDA``, ``@onlyCPU``, ``@onlyMPS``, ...) run
    its test on vdev instead of skipping it. Set once torch's common_device_type is imported."""
    from torch_vdev import _post_import

    module = "torch.testing._internal.common_device_type"

    def bypass() -> None:
        sys.modules[module].PrivateUse1TestBase.bypass_device_restrictions = True

    _post_import.run_after_import(module, bypass)
