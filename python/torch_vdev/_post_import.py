"""Post-import actions: run code right after a module has been imported, before its importer
gets it back.

vdev plugs into code that is not its own without importing it early: ``torch_vdev.compile``
registers with Dynamo and Inductor once torch imports them, and ``torch_vdev.testing``'s harness
adapters fill in a test harness's device tables once a test suite imports it (before the suite's
``from ... import torch_device`` copies them). ``run_after_import(name, action)`` runs ``action``
now if ``name`` has been imported, else right after it is: a finder on ``sys.meta_path`` (there
only while an action waits) wraps the module's loader, and the action runs once the module's code
has run. An action that raises makes the import raise (the importer sees the error), and stays
registered: the next import of the module runs it again.

Thread rules: registering takes one lock and may happen on any thread, but not while another
thread is running the module's own code (it would run at once, on the half-imported module:
register before the import starts, or on the importing thread); an action runs on the thread
that imports its module, once it succeeds.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

_lock = threading.Lock()
# Module name -> the actions to run once it has been imported, in the order they were registered.
_after_import: dict[str, list[Callable[[], None]]] = {}


def run_after_import(name: str, action: Callable[[], None]) -> None:
    """Runs ``action`` now if module ``name`` has been imported, else right after it is."""
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            if not _after_import:
                sys.meta_path.insert(0, _PostImportHook())
            _after_import.setdefault(name, []).append(action)
            return
    action()


def waiting(name: str) -> bool:
    """Whether an action waits for module ``name`` (for tests and diagnostics)."""
    with _lock:
        return name in _after_import


class _RunningLoader(importlib.abc.Loader):
    """Wraps a module's loader: runs its post-import actions once the module has been imported."""

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
    """Finds the modules that have post-import actions with the other finders and wraps their
    loaders; the actions are taken off only when the module is really loaded (a find_spec alone,
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
        actions = _after_import.pop(name, [])
        if not _after_import:
            sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _PostImportHook)]
    for i, action in enumerate(actions):
        try:
            action()
        except BaseException:
            # The import fails, and Python forgets the module: the next import of it runs its
            # code again, and must run the actions again (an adapter that refuses a version
            # refuses it at every import, not only the first one).
            with _lock:
                if not _after_import:
                    sys.meta_path.insert(0, _PostImportHook())
                _after_import.setdefault(name, [])[:0] = actions[i:]
            raise
