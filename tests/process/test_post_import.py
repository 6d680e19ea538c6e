"""torch_vdev._post_import: actions that run once a module has been imported, before its importer
gets it back (how torch_vdev.compile registers with Dynamo and the harness adapters fill in a
test harness's globals before a test module copies them)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from torch_vdev import _post_import


@pytest.fixture
def fresh_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A module never imported: `value` is computed at its import, as accelerate's globals are."""
    name = f"vdev_post_import_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text("value = 'computed at import'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_actions_run_in_order_after_the_module_and_before_its_importer(fresh_module: str):
    seen = []

    def first():
        module = sys.modules[fresh_module]
        seen.append(("first", module.value))
        module.value = "replaced"

    _post_import.run_after_import(fresh_module, first)
    _post_import.run_after_import(fresh_module, lambda: seen.append(("second", None)))
    assert _post_import.waiting(fresh_module) and not seen  # nothing imported yet
    imported = __import__(fresh_module)
    assert seen == [("first", "computed at import"), ("second", None)]
    assert imported.value == "replaced"  # the importer got the module after the action
    assert not _post_import.waiting(fresh_module)
    __import__(fresh_module)  # imported again: the actions ran once
    assert len(seen) == 2


def test_an_action_for_an_imported_module_runs_at_once(fresh_module: str):
    __import__(fresh_module)
    seen = []
    _post_import.run_after_import(fresh_module, lambda: seen.append(True))
    assert seen == [True] and not _post_import.waiting(fresh_module)


def test_an_action_that_raises_makes_the_import_raise(fresh_module: str):
    def refuse():
        raise RuntimeError("this version no longer fits")

    seen = []
    _post_import.run_after_import(fresh_module, refuse)
    _post_import.run_after_import(fresh_module, lambda: seen.append(True))
    for _ in range(2):  # at every import: a refused module is never used unadapted
        with pytest.raises(RuntimeError, match="no longer fits"):
            __import__(fresh_module)
        assert fresh_module not in sys.modules and not seen
    _post_import._after_import.pop(fresh_module)  # the refusal withdrawn: the module imports


def test_finding_a_module_does_not_run_its_actions(fresh_module: str):
    import importlib.util

    seen = []
    _post_import.run_after_import(fresh_module, lambda: seen.append(True))
    assert importlib.util.find_spec(fresh_module) is not None
    assert not seen and _post_import.waiting(fresh_module)
    __import__(fresh_module)
    assert seen == [True]
