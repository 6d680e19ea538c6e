"""The plugin's state and how it reads its options (command line, then ini file), and whether it
is enabled (torch_vdev/pytest_plugin/__init__.py)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest

# The name `-p` and the pytest11 entry point give the plugin (the package; one name: pluggy refuses
# a module registered twice under two names).
PLUGIN_NAME = __name__.rpartition(".")[0]

state_key = pytest.StashKey["State"]()


@dataclass
class State:
    leak_check: bool
    hardware_applied: bool = False
    harnesses_enabled: bool = False
    harness_variables: dict[str, str] = field(default_factory=dict)  # those the plugin set
    # Per-test leak-check baseline: allocated bytes per device and the live blocks' identities.
    before_allocated: list[int] = field(default_factory=list)
    before_blocks: set[tuple[int, int, int]] = field(default_factory=set)


def option(config: pytest.Config, dest: str) -> Any:
    # Before the full parse (pytest_load_initial_conftests) only known_args_namespace holds the
    # command line; config.option holds the defaults then (False for --vdev), so a default there
    # must not hide a flag given.
    value = getattr(config.option, dest, None)
    if not value:
        value = getattr(config.known_args_namespace, dest, None) or value
    return value


def setting(config: pytest.Config, dest: str) -> str | None:
    """A hardware setting: the command line wins over the ini file; None when neither gives it."""
    value = option(config, dest)
    if value is None:
        value = config.getini(dest) or None
    return None if value is None else str(value)


def _requested_by_name(config: pytest.Config) -> bool:
    """Whether ``-p torch_vdev.pytest_plugin`` or PYTEST_PLUGINS named this module: with the entry
    point installed, pytest loads it through the entry point even then, so being loaded says
    nothing."""
    named = list(option(config, "plugins") or [])
    named += os.environ.get("PYTEST_PLUGINS", "").split(",")
    return any(name.strip() == PLUGIN_NAME for name in named)


def _loaded_by_entry_point(config: pytest.Config) -> bool:
    module = sys.modules[PLUGIN_NAME]
    return any(plugin is module for plugin, _ in config.pluginmanager.list_plugin_distinfo())


def enabled(config: pytest.Config) -> bool:
    if _requested_by_name(config) or not _loaded_by_entry_point(config):
        return True  # -p, PYTEST_PLUGINS, or pytest_plugins in a conftest: asked for by name
    if option(config, "vdev") or config.getini("vdev"):
        return True
    return (
        leak_check(config)
        or bypass(config)
        or any(setting(config, dest) is not None for dest in ("vdev_devices", "vdev_memory"))
    )


def leak_check(config: pytest.Config) -> bool:
    return bool(option(config, "vdev_leak_check") or config.getini("vdev_leak_check"))


def bypass(config: pytest.Config) -> bool:
    return bool(
        option(config, "vdev_bypass_device_restrictions")
        or config.getini("vdev_bypass_device_restrictions")
    )
