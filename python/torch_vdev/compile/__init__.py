"""torch.compile for vdev: Dynamo's device interface and Inductor's backend.

* ``device_interface``: ``VdevInterface``, Dynamo's view of the device (streams, events,
  synchronize, properties), registered when ``torch._dynamo`` is first imported;
* ``inductor_backend``: Inductor's C++ scheduling with a wrapper that queues each generated kernel
  on a vdev stream, registered when Inductor first asks ``torch.vdev`` for it;
* ``kernels``: compiling those kernels with their stream trampoline and loading them;
* ``graph_policy``: ``mode="reduce-overhead"``, compiled functions replayed as vdev graphs,
  installed with the device interface (before Inductor can load a compiled graph from its cache).

Neither is imported by ``import torch`` (importing ``torch._dynamo`` costs over a second): the
device interface is registered by a one-shot import hook on the ``torch._dynamo`` package, run
once the package has been imported and before anything is traced; Inductor's backend through the
``torch.vdev`` attributes its ``init_backend_registration`` reads (``Scheduling``).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
import warnings
from types import ModuleType
from typing import Any

_DYNAMO = "torch._dynamo"
_lock = threading.Lock()


def _register_device_interface() -> None:
    """Registers vdev with Dynamo. A failure is a warning, not an ImportError: Dynamo must stay
    importable for every other device."""
    try:
        from torch_vdev.compile import device_interface

        device_interface.register()
        # Installs reduce-overhead's policy when imported (or, if graph_policy is being imported
        # right now, which imports Dynamo through Inductor, at the end of that import).
        from torch_vdev.compile import graph_policy  # noqa: F401
    except Exception as e:  # noqa: BLE001
        warnings.warn(f"torch_vdev: torch.compile is not available for vdev: {e!r}", stacklevel=2)


class _RegisteringLoader(importlib.abc.Loader):
    """Wraps the loader of torch._dynamo: registers vdev once the package has been imported."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _remove_hooks()  # only now: a find_spec alone (importlib.util.find_spec) imports nothing
        _register_device_interface()

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... for tracebacks
        return getattr(self._loader, name)


class _DynamoImportHook(importlib.abc.MetaPathFinder):
    """Finds torch._dynamo with the other finders, once, and wraps its loader."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != _DYNAMO:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _RegisteringLoader(spec.loader)
        return spec


def _remove_hooks() -> None:
    with _lock:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _DynamoImportHook)]


def install() -> None:
    """Registers vdev with Dynamo now if it is loaded, else when it is (called once, by
    torch_vdev._registration)."""
    with _lock:
        if _DYNAMO not in sys.modules:
            sys.meta_path.insert(0, _DynamoImportHook())
            return
    _register_device_interface()


def inductor_hook(name: str) -> Any:
    """``torch.vdev.<name>`` for Inductor's backend registration (Scheduling, the wrappers)."""
    from torch_vdev.compile import inductor_backend

    inductor_backend.register()
    return inductor_backend.INDUCTOR_HOOKS[name]
