"""The one boundary between vdev and the Hugging Face libraries' test harnesses.

transformers and diffusers take a third-party device from a variable (``TRANSFORMERS_TEST_DEVICE``,
``DIFFUSERS_TEST_DEVICE``: set by torch_vdev's pytest plugin), but transformers' device tables
(``backend_device_count``, ``backend_memory_allocated``, ...) answer for an unknown device with
defaults (one device, no memory), and a spec file can fill only three of them. accelerate's test
harness (``accelerate.test_utils.testing``), which PEFT's uses too, knows a fixed ladder of
devices and no hook at all: ``get_backend()`` answers ``("cpu", 1, ...)`` on a machine whose
accelerator is vdev, and its decorators (``require_non_cpu``, ``require_single_device``,
``require_multi_device``) skip every device test. ``PartialState.default_device`` (where
``Accelerator``, transformers' ``Trainer`` and accelerate's offload hooks put models) and PEFT's
``infer_device()`` have the same ladder. And safetensors' ``load_file``, with which PEFT loads
adapters to that device, parses device names itself and refuses every PrivateUse1 device.

This module fills those in, and every attribute it touches (sets, fills or calls) is an entry of
``MANIFEST``: the module and attribute, what vdev does there, whether the adapter needs it, and
the library versions it was verified against. ``install()`` registers, for each library, a
post-import action (``torch_vdev._post_import``) that runs as soon as the harness module has been
imported, before a test module's ``from accelerate.test_utils import torch_device`` copies a
value, and that first checks the installed module against the manifest: a required target that is
missing or is no longer what the adapter expects (a table, a function, a value) raises
``HarnessAdapterError`` at every import of the harness, naming the library, its version, the
target and the versions verified, instead of running the suite on the wrong device. A version not
verified whose targets all fit is used, with a warning that names it.

Which libraries see vdev follows each one's own variable: transformers' tables are filled when
``TRANSFORMERS_TEST_DEVICE`` names vdev (the pytest plugin sets it when unset), accelerate and
PEFT are adapted unless ``ACCELERATE_TORCH_DEVICE`` (the variable accelerate's ``PartialState``
reads) names another device. The adapter does not set that variable: accelerate would put every
``Accelerator`` there, ``Accelerator(cpu=True)`` included, which it does not do on a GPU.

Thread rules: ``install()`` is called once, from the thread that configures the run (pytest's
main thread); the actions run on the importing thread, under the import lock.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

import torch

from torch_vdev import _post_import
from torch_vdev.testing import DEVICE
from torch_vdev.testing import hf_device_spec as spec


class HarnessAdapterError(RuntimeError):
    """An installed library no longer has what vdev's adapter for its test harness expects."""


@dataclass(frozen=True)
class Target:
    """One attribute of a library's test harness that the adapter sets or fills.

    ``kind``: ``table`` (a dict from device name to a function or value: a ``vdev`` entry is
    added), ``function`` (replaced, or called where ``what`` says so), ``value`` (a module
    global computed at import, of type ``value_type``: replaced), ``property`` (of a class,
    ``attribute`` being ``Class.name``: replaced);
    ``required``: whether the adapter is wrong without it (an optional one, missing in some
    versions, is left out); ``verified``: the library versions it was checked against."""

    distribution: str
    module: str
    attribute: str
    kind: Literal["table", "function", "value", "property"]
    what: str
    required: bool
    verified: tuple[str, ...]
    value_type: type | None = None


_TRANSFORMERS = ("5.24.0",)
_SAFETENSORS = ("0.8.0",)
_ACCELERATE = ("1.15.0",)
_PEFT = ("0.21.2",)


def _table(attribute: str, spec_name: str, required: bool) -> Target:
    return Target(
        "transformers",
        "transformers.testing_utils",
        attribute,
        "table",
        f"vdev's entry: hf_device_spec.{spec_name}",
        required,
        _TRANSFORMERS,
    )


# transformers' device tables and the spec name each vdev entry comes from.
_TABLES = {
    "BACKEND_MANUAL_SEED": ("MANUAL_SEED_FN", True),
    "BACKEND_EMPTY_CACHE": ("EMPTY_CACHE_FN", True),
    "BACKEND_DEVICE_COUNT": ("DEVICE_COUNT_FN", True),
    "BACKEND_MEMORY_ALLOCATED": ("MEMORY_ALLOCATED_FN", False),
    "BACKEND_MAX_MEMORY_ALLOCATED": ("MAX_MEMORY_ALLOCATED_FN", False),
    "BACKEND_RESET_MAX_MEMORY_ALLOCATED": ("RESET_MAX_MEMORY_ALLOCATED_FN", False),
    "BACKEND_RESET_PEAK_MEMORY_STATS": ("RESET_PEAK_MEMORY_STATS_FN", False),
    "BACKEND_SYNCHRONIZE": ("SYNCHRONIZE_FN", False),
    "BACKEND_TORCH_ACCELERATOR_MODULE": ("ACCELERATOR_MODULE", False),
}

_TESTING = "accelerate.test_utils.testing"

MANIFEST: tuple[Target, ...] = (
    *(_table(table, name, required) for table, (name, required) in _TABLES.items()),
    Target(
        "accelerate",
        _TESTING,
        "get_backend",
        "function",
        'answers ("vdev", torch.vdev.device_count(), torch.vdev.memory_allocated); PEFT\'s '
        "harness calls it at its import",
        True,
        _ACCELERATE,
    ),
    Target(
        "accelerate",
        _TESTING,
        "torch_device",
        "value",
        '"vdev": require_non_cpu, require_single_device read it',
        True,
        _ACCELERATE,
        str,
    ),
    Target(
        "accelerate",
        _TESTING,
        "device_count",
        "value",
        "torch.vdev.device_count(): require_single_device, require_multi_device read it",
        True,
        _ACCELERATE,
        int,
    ),
    Target(
        "accelerate",
        _TESTING,
        "memory_allocated_func",
        "function",
        "torch.vdev.memory_allocated (a global computed at import, as the two above)",
        True,
        _ACCELERATE,
    ),
    Target(
        "accelerate",
        _TESTING,
        "DEFAULT_LAUNCH_COMMAND",
        "value",
        "get_launch_command(num_processes=<vdev's device count>), as accelerate computes it",
        False,
        _ACCELERATE,
        list,
    ),
    Target(
        "accelerate",
        _TESTING,
        "get_launch_command",
        "function",
        "called (not replaced) to compute DEFAULT_LAUNCH_COMMAND",
        False,
        _ACCELERATE,
    ),
    Target(
        "accelerate",
        "accelerate.state",
        "PartialState.default_device",
        "property",
        'torch.device("vdev") (the ladder it replaces knows mps, mlu, sdaa, musa, npu, hpu, '
        "cuda, xpu, neuron, then cpu); PartialState(cpu=True) still answers cpu",
        True,
        _ACCELERATE,
    ),
    Target(
        "safetensors",
        "safetensors.torch",
        "load_file",
        "function",
        "wrapped: to a vdev device it loads on the CPU, then copies each tensor to the device "
        "(safetensors parses the device itself and knows no PrivateUse1 device: 'device vdev is "
        "invalid'); PEFT loads adapters there, diffusers' disk offloading too",
        False,
        _SAFETENSORS,
    ),
    Target(
        "peft",
        "peft.utils.other",
        "infer_device",
        "function",
        '"vdev" (the ladder it replaces knows cuda, mps, mlu, xpu, npu, then cpu)',
        True,
        _PEFT,
    ),
)


def targets(distribution: str) -> list[Target]:
    return [t for t in MANIFEST if t.distribution == distribution]


def version(distribution: str, module: ModuleType | None = None) -> str:
    """The installed version of ``distribution``: its metadata, else its module's __version__."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return str(getattr(module, "__version__", "unknown"))


def _fits(target: Target, module: ModuleType) -> str | None:
    """Why ``target`` does not fit the imported module, or None."""
    owner: Any = module
    *path, name = target.attribute.split(".")
    for part in path:
        owner = getattr(owner, part, None)
    if owner is None or not hasattr(owner, name):
        return "is missing"
    if target.kind == "property":
        found = inspect.getattr_static(owner, name)
        return (
            None if isinstance(found, property) else f"is a {type(found).__name__}, not a property"
        )
    value = getattr(owner, name)
    if target.kind == "table" and not isinstance(value, dict):
        return f"is a {type(value).__name__}, not a table (dict) of devices"
    if target.kind == "function" and not callable(value):
        return f"is a {type(value).__name__}, not a function"
    if target.kind == "value" and not isinstance(value, target.value_type):
        return f"is a {type(value).__name__}, not a {target.value_type.__name__}"
    return None


# The variable that keeps each library off vdev (named in HarnessAdapterError).
_OPT_OUT = {
    "transformers": "TRANSFORMERS_TEST_DEVICE",
    "accelerate": "ACCELERATE_TORCH_DEVICE",
    "peft": "ACCELERATE_TORCH_DEVICE",
}


def check(distribution: str, module_name: str) -> list[Target]:
    """The targets of ``module_name`` that the adapter can set; raises HarnessAdapterError when a
    required one does not fit the installed version."""
    module = sys.modules[module_name]
    installed = version(distribution, sys.modules.get(distribution))
    usable = []
    for target in targets(distribution):
        if target.module != module_name:
            continue
        problem = _fits(target, module)
        if problem is None:
            usable.append(target)
        elif target.required:
            raise HarnessAdapterError(
                f"torch_vdev's adapter for {distribution}'s test harness does not fit "
                f"{distribution} {installed}: {target.module}.{target.attribute} {problem} "
                f"(the adapter was verified with {distribution} "
                f"{', '.join(target.verified)}; its manifest: torch_vdev.testing.huggingface). "
                f"Run without it ({_OPT_OUT[distribution]}=cpu) or use a torch-vdev that "
                f"supports {distribution} {installed}."
            )
    verified = targets(distribution)[0].verified
    if installed not in verified:
        warnings.warn(
            f"torch_vdev: {distribution} {installed} has what vdev's adapter for its test harness "
            f"needs, but was not verified with it (verified: {', '.join(verified)})",
            stacklevel=2,
        )
    return usable


def _names_vdev(variable: str, unset: bool) -> bool:
    value = os.environ.get(variable)
    if value is None:
        return unset
    return value.split(":")[0] == DEVICE


# --- the actions ---------------------------------------------------------------------------------


def _adapt_transformers() -> None:
    module = sys.modules["transformers.testing_utils"]
    # The tables are looked up by the variable's exact text: "vdev", or "vdev:1" as given.
    names = {DEVICE, os.environ.get("TRANSFORMERS_TEST_DEVICE", DEVICE)}
    for target in check("transformers", module.__name__):
        spec_name, _ = _TABLES[target.attribute]
        for name in names:
            # setdefault: an entry of the user's own spec file (TRANSFORMERS_TEST_DEVICE_SPEC) wins.
            getattr(module, target.attribute).setdefault(name, getattr(spec, spec_name))


def _vdev_backend() -> tuple[str, int, Callable[..., int]]:
    return DEVICE, torch.vdev.device_count(), torch.vdev.memory_allocated


def _adapt_accelerate() -> None:
    module = sys.modules[_TESTING]
    usable = {t.attribute for t in check("accelerate", _TESTING)}
    device, count, allocated = _vdev_backend()
    values: dict[str, Any] = {
        "get_backend": _vdev_backend,
        "torch_device": device,
        "device_count": count,
        "memory_allocated_func": allocated,
    }
    if {"DEFAULT_LAUNCH_COMMAND", "get_launch_command"} <= usable:  # both checked by the manifest
        values["DEFAULT_LAUNCH_COMMAND"] = module.get_launch_command(
            num_processes=count, monitor_interval=0.1
        )
    # The package re-exports these (``from .testing import ...``). When the action runs as
    # testing.py finishes, the package has not copied them yet; when accelerate.test_utils was
    # imported before the adapter was installed, its copies are replaced too.
    package = sys.modules.get(_TESTING.rpartition(".")[0])
    for name, value in values.items():
        if name in usable:
            setattr(module, name, value)
            if package is not None and hasattr(package, name):
                setattr(package, name, value)


def _adapt_accelerate_state() -> None:
    module = sys.modules["accelerate.state"]
    check("accelerate", module.__name__)

    def default_device(self: Any) -> torch.device:
        return torch.device(DEVICE)

    default_device.__doc__ = "vdev (torch_vdev.testing.huggingface: accelerate's ladder knows none)"
    module.PartialState.default_device = property(default_device)


def _adapt_safetensors() -> None:
    module = sys.modules["safetensors.torch"]
    if not check("safetensors", module.__name__):
        return  # not what the adapter knows: loading to vdev fails as safetensors says
    original = module.load_file

    @functools.wraps(original)
    def load_file(filename: Any, device: Any = "cpu", **kwargs: Any) -> dict[str, Any]:
        if isinstance(device, str | torch.device) and torch.device(device).type == DEVICE:
            loaded = original(filename, "cpu", **kwargs)
            return {name: tensor.to(device) for name, tensor in loaded.items()}
        return original(filename, device, **kwargs)

    module.load_file = load_file


def _adapt_peft() -> None:
    module = sys.modules["peft.utils.other"]
    check("peft", module.__name__)

    def infer_device() -> str:
        return DEVICE

    infer_device.__doc__ = "vdev (torch_vdev.testing.huggingface: PEFT's ladder knows no vdev)"
    module.infer_device = infer_device
    # Copies made before the adapter was installed (peft.utils re-exports it).
    for name in ("peft.utils", "peft"):
        other = sys.modules.get(name)
        if other is not None and hasattr(other, "infer_device"):
            other.infer_device = infer_device


def install() -> list[str]:
    """Registers the adapters of the libraries whose variable names vdev (or, for transformers,
    is unset); each runs once its harness module is imported (now, if it has been). Returns the
    modules adapted or waited for."""
    # Only a vdev device takes the wrapper's path: it is installed whatever the variables say.
    wanted = [("safetensors.torch", _adapt_safetensors)]
    if _names_vdev("TRANSFORMERS_TEST_DEVICE", unset=True):
        wanted.append(("transformers.testing_utils", _adapt_transformers))
    if _names_vdev("ACCELERATE_TORCH_DEVICE", unset=True):
        wanted.append(("accelerate.state", _adapt_accelerate_state))
        wanted.append((_TESTING, _adapt_accelerate))
        wanted.append(("peft.utils.other", _adapt_peft))
    for module, action in wanted:
        _post_import.run_after_import(module, action)
    return [module for module, _ in wanted]
