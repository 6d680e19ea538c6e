"""--vdev-devices and --vdev-memory: the simulated hardware, set through the runtime's variables
before it reads them (at the first device use)."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from torch_vdev.pytest_plugin.settings import setting, state_key


def _parse(option: str, text: str, parser: Any) -> int:
    """The runtime's own parser of the variable the option sets (cpp/runtime/config.h), so that the
    option takes exactly what the variable takes; its error is a usage error naming the option."""
    try:
        return parser(text, option)
    except ValueError as e:
        # The runtime's words name the option and the value ("--vdev-memory='0' is not a valid
        # memory size: expected ...").
        raise pytest.UsageError(str(e).removeprefix("[config] ")) from None


def _parse_devices(text: str) -> int:
    from torch_vdev import _C

    return _parse("--vdev-devices", text, _C._parse_device_count)


def _parse_memory(text: str) -> int:
    from torch_vdev import _C

    return _parse("--vdev-memory", text, _C._parse_memory_size)


def _wanted(config: pytest.Config) -> list[tuple[str, str, str, int]]:
    """(option, variable, text, parsed value) for each hardware option given; raises UsageError
    for an invalid one, before anything is set."""
    wanted = []
    if (devices := setting(config, "vdev_devices")) is not None:
        wanted.append(("--vdev-devices", "VDEV_DEVICE_COUNT", devices, _parse_devices(devices)))
    if (memory := setting(config, "vdev_memory")) is not None:
        wanted.append(("--vdev-memory", "VDEV_DEVICE_MEMORY", memory, _parse_memory(memory)))
    return wanted


def apply(config: pytest.Config) -> None:
    """Sets the runtime's variables while it has not read them yet (it reads them at the first
    device use), else checks that what it read is what was asked for."""
    state = config.stash[state_key]
    if state.hardware_applied:
        return
    state.hardware_applied = True
    asked = _wanted(config)
    if not asked:
        return
    loaded = sys.modules.get("torch_vdev._C")
    if loaded is None or not loaded._config_read():
        for _, variable, text, _ in asked:
            os.environ[variable] = text.strip()  # child processes (spawned ranks) inherit it
        return
    import torch

    error = sys.modules["torch_vdev._C"]._config_error()
    actual = {
        "VDEV_DEVICE_COUNT": None if error else torch.vdev.device_count(),
        "VDEV_DEVICE_MEMORY": None if error else torch.vdev.mem_get_info(0)[1],
    }
    for option, variable, text, value in asked:
        if actual[variable] != value:
            raise pytest.UsageError(
                f"{option} {text}: too late, the vdev runtime already read its configuration "
                f"({variable}: {error or actual[variable]}): vdev was used before this plugin's "
                "pytest_load_initial_conftests hook (by another plugin, or by code run at its "
                f"import). Set {variable}={text.strip()} in pytest's environment instead"
            )


def check_runtime_config(config: pytest.Config) -> None:
    """Loads torch (and vdev) now, so that a configuration the runtime refuses (a memory size
    this machine cannot reserve) is one usage error, not a failure of every test."""
    import torch  # noqa: F401  (autoloads torch_vdev, which reads the VDEV_* variables)

    import torch_vdev  # noqa: F401  (registers vdev when autoloading is off)
    from torch_vdev import _C

    error = _C._config_error()
    if error is None:
        return
    given = ", ".join(f"{option} {text}" for option, _, text, _ in _wanted(config))
    raise pytest.UsageError(
        f"the vdev runtime refused its configuration{f' ({given})' if given else ''}: {error}"
    )
