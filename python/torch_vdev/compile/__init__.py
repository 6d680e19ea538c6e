"""torch.compile for vdev: Dynamo's device interface and Inductor's backend.

* ``device_interface``: ``VdevInterface``, Dynamo's view of the device (streams, events,
  synchronize, properties), registered when ``torch._dynamo`` is first imported;
* ``inductor_backend``: Inductor's C++ scheduling with a wrapper that queues each generated kernel
  on a vdev stream, registered once Inductor's ``compile_fx`` has been imported (every compilation
  imports it before lowering a graph);
* ``kernels``: compiling those kernels with their stream trampoline and loading them;
* ``graph_policy``: ``mode="reduce-overhead"``, the policy that hands compiled functions to vdev
  graphs, installed once Inductor's ``output_code`` has been imported (before Inductor can compile
  a graph or load one from its cache); ``graph_trees``: what a compiled function then does with
  its graphs (recording, replay, generations), as CUDA's cudagraph trees;
* ``torch_internals``: the one boundary with torch's private APIs: every module here reaches
  Dynamo's and Inductor's internals through it, and its manifest lists each reach.

None is imported by ``import torch`` (importing ``torch._dynamo`` costs over a second): all are
installed by post-import actions (a finder on ``sys.meta_path`` that wraps the loader of the
module they wait for, and runs them once it has been imported): the device interface once the
``torch._dynamo`` package has been imported, before anything is traced, and Inductor's backend
once ``torch._inductor.compile_fx`` has been. Nothing here is imported by ``torch.vdev``.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
import threading
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

from torch_vdev.compile import torch_internals

_DYNAMO = torch_internals.hooked_module("torch._dynamo")
# The module whose class reduce-overhead's policy patches (CompiledFxGraph). Once it has been
# imported, everything the policy imports has been too.
_OUTPUT_CODE = torch_internals.hooked_module("torch._inductor.output_code")
# What every compilation imports before it lowers a graph (and no torch module imports while
# Inductor initialises): once it has been imported, everything the backend imports has been too.
_COMPILE_FX = torch_internals.hooked_module("torch._inductor.compile_fx")
_lock = threading.Lock()
_after_import: dict[str, Callable[[], None]] = {}  # module name -> run once it has been imported


def _register_device_interface() -> None:
    """Registers vdev with Dynamo, then reduce-overhead's graph policy. A failure is a warning,
    not an ImportError: Dynamo must stay importable for every other device."""
    try:
        from torch_vdev.compile import device_interface

        device_interface.register()
    except Exception as e:  # noqa: BLE001
        warnings.warn(f"torch_vdev: torch.compile is not available for vdev: {e!r}", stacklevel=2)
        return
    # Dynamo is often imported by Inductor's own package while it initializes (``import
    # torch._inductor.config`` imports standalone_compile, which imports Dynamo): importing the
    # policy now would import Inductor modules that are still half-initialized. It is installed
    # once Inductor's output_code has been imported instead, which is before Inductor can compile
    # a graph or load one from its cache.
    _run_after_import(_OUTPUT_CODE, _install_graph_policy)


def _install_graph_policy() -> None:
    try:
        from torch_vdev.compile import graph_policy

        graph_policy.install()
    except Exception as e:  # noqa: BLE001
        warnings.warn(
            f'torch_vdev: torch.compile(mode="reduce-overhead") will not use vdev graphs: {e!r}',
            stacklevel=2,
        )


def _register_inductor_backend() -> None:
    """Registers vdev's Inductor backend. A failure is a warning, not an ImportError: Inductor
    must stay importable for every other device."""
    try:
        from torch_vdev.compile import inductor_backend

        inductor_backend.register()
    except Exception as e:  # noqa: BLE001
        warnings.warn(
            f"torch_vdev: Inductor cannot generate code for vdev: {e!r}",
            stacklevel=2,
        )


def _run_after_import(name: str, action: Callable[[], None]) -> None:
    """Runs ``action`` now if module ``name`` has been imported, else right after it is."""
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            if not _after_import:
                sys.meta_path.insert(0, _PostImportHook())
            _after_import[name] = action
            return
    action()


class _RunningLoader(importlib.abc.Loader):
    """Wraps a module's loader: runs its post-import action once the module has been imported."""

    def __init__(self, loader: Any, action: Callable[[], None]) -> None:
        self._loader = loader
        self._action = action

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._action()

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... for tracebacks
        return getattr(self._loader, name)


class _PostImportHook(importlib.abc.MetaPathFinder):
    """Finds the modules that have a post-import action with the other finders and wraps their
    loaders; the action is taken off only when the module is really loaded (a find_spec alone,
    as importlib.util.find_spec does, imports nothing)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        with _lock:
            if fullname not in _after_import:
                return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _RunningLoader(spec.loader, functools.partial(_loaded, fullname))
        return spec


def _loaded(name: str) -> None:
    with _lock:
        action = _after_import.pop(name, None)
        if not _after_import:
            sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _PostImportHook)]
    if action is not None:
        action()


def install() -> None:
    """Registers vdev with Dynamo and Inductor now for those loaded, else when they are (called
    once, by torch_vdev._registration)."""
    _run_after_import(_DYNAMO, _register_device_interface)
    _run_after_import(_COMPILE_FX, _register_inductor_backend)
