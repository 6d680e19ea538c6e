"""A pytest plugin for running a library's device-generic test suite on vdev.

Enable it with ``pytest -p torch_vdev.pytest_plugin``, with ``--vdev`` (or any of its options), or
with ``vdev = true`` in the ini file: torch-vdev's ``pytest11`` entry point registers this module on
every pytest run, and registered but not enabled, it only adds its options. Being registered costs
an ``import torch`` at pytest's start (the ``torch_vdev`` package that holds it imports torch),
nothing else: vdev reads its configuration only at the first device use.

Enabled, it makes every test own its device work:

- **Queued errors.** vdev runs operators on stream workers, and an operator that fails there raises
  at the next synchronization, as a CUDA kernel error does: without a synchronization at the end of
  a test, the error fails whichever test synchronizes next. The plugin synchronizes every vdev
  device at the end of each phase of a test (setup, call, teardown), inside the phase, so the error
  fails the test (or the fixture) that queued it, naming the device. This is the spirit of
  PyTorch's own harness, which synchronizes CUDA after a failing test so that a device error is
  not blamed on the next one (``TestCase._should_stop_test_suite``); vdev's streams stay usable
  after an error, so here the run goes on.
- **Leaks** (``--vdev-leak-check``). A test that ends with more device memory allocated than it
  started with fails, naming the allocations it left alive: device, stream, size and, when
  ``torch.vdev.memory._record_memory_history()`` is recording, where each was allocated (as
  PyTorch's ``CudaMemoryLeakCheck``, which compares ``memory_allocated`` before and after).
- **Hardware** (``--vdev-devices N``, ``--vdev-memory SIZE``). The runtime reads
  ``VDEV_DEVICE_COUNT`` and ``VDEV_DEVICE_MEMORY`` once, at the first device use: the plugin sets
  them before the conftests are imported, and refuses (a usage error) when something used vdev
  earlier (another plugin) and the runtime read other values.
- **Test harnesses** (``torch_vdev.testing``). The variables Hugging Face's harnesses read
  (``TRANSFORMERS_TEST_DEVICE``, ``DIFFUSERS_TEST_DEVICE``, ...) are set to vdev where unset,
  before the conftests are imported, and transformers' device tables, accelerate's and PEFT's
  device ladders are adapted as they are imported (``torch_vdev.testing.huggingface``);
  ``--vdev-bypass-device-restrictions`` turns on PyTorch's switch that runs ``@onlyCUDA`` tests
  on vdev (``PrivateUse1TestBase.bypass_device_restrictions``).

This package holds the hooks; each concern is a module: ``settings`` (options, state, enabling),
``hardware``, ``harnesses``, ``queued_errors``, ``leak_check``.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

from torch_vdev.pytest_plugin import hardware, harnesses
from torch_vdev.pytest_plugin.leak_check import check_leaks, record_baseline
from torch_vdev.pytest_plugin.queued_errors import synchronized
from torch_vdev.pytest_plugin.settings import State, enabled, leak_check, state_key


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("vdev", "torch-vdev (simulated accelerator devices)")
    group.addoption(
        "--vdev",
        action="store_true",
        default=False,
        help="enable torch_vdev.pytest_plugin: synchronize every vdev device after each test, so "
        "an error queued by a test fails that test (also: ini vdev = true)",
    )
    group.addoption(
        "--vdev-leak-check",
        action="store_true",
        default=None,
        help="fail a test that ends with more vdev memory allocated than it started with, naming "
        "the live allocations (implies --vdev; also: ini vdev_leak_check = true)",
    )
    group.addoption(
        "--vdev-devices",
        metavar="N",
        default=None,
        help="number of simulated vdev devices, 1..64 (sets VDEV_DEVICE_COUNT; "
        "implies --vdev; also: ini vdev_devices)",
    )
    group.addoption(
        "--vdev-memory",
        metavar="SIZE",
        default=None,
        help="memory of each vdev device, e.g. 512MiB or 4GiB (sets VDEV_DEVICE_MEMORY; implies "
        "--vdev; also: ini vdev_memory)",
    )
    group.addoption(
        "--vdev-bypass-device-restrictions",
        action="store_true",
        default=None,
        help="run the tests of PyTorch's harness marked @onlyCUDA (every @onlyOn: @onlyCPU too) "
        "on vdev instead of skipping them: PrivateUse1TestBase.bypass_device_restrictions "
        "(implies --vdev; also: ini vdev_bypass_device_restrictions = true)",
    )
    parser.addini(
        "vdev", "enable torch_vdev.pytest_plugin (see --vdev)", type="bool", default=False
    )
    parser.addini("vdev_leak_check", "see --vdev-leak-check", type="bool", default=False)
    parser.addini("vdev_devices", "see --vdev-devices", default="")
    parser.addini("vdev_memory", "see --vdev-memory", default="")
    parser.addini(
        "vdev_bypass_device_restrictions",
        "see --vdev-bypass-device-restrictions",
        type="bool",
        default=False,
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    # The earliest hook with the options parsed, and before the conftests (which import torch).
    if not enabled(early_config):
        return
    early_config.stash[state_key] = State(leak_check=leak_check(early_config))
    hardware.apply(early_config)
    harnesses.enable(early_config)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if not enabled(config):
        return
    if state_key not in config.stash:  # registered after the initial conftests were loaded
        config.stash[state_key] = State(leak_check=leak_check(config))
    hardware.apply(config)
    harnesses.enable(config)
    hardware.check_runtime_config(config)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    state = config.stash.get(state_key, None)
    if state is None:
        return None
    import torch

    # Not the memory: asking for it would initialize vdev, which the tests should do.
    leak = ", leak check on" if state.leak_check else ""
    lines = [f"vdev: {torch.vdev.device_count()} device(s), synchronized after each test{leak}"]
    if state.harness_variables:
        names = " ".join(f"{k}={v}" for k, v in state.harness_variables.items())
        lines.append(f"vdev: harness variables set: {names}")
    return lines


def pytest_unconfigure(config: pytest.Config) -> None:
    # The variables the plugin set go with the run (a pytest run inside a process goes on).
    state = config.stash.get(state_key, None)
    for variable in state.harness_variables if state is not None else ():
        os.environ.pop(variable, None)


def _active(item: pytest.Item) -> State | None:
    return item.config.stash.get(state_key, None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, Any, Any]:
    if _active(item) is None:
        return (yield)
    return (yield from synchronized("setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    state = _active(item)
    if state is None:
        return (yield)
    if state.leak_check:
        record_baseline(state)
    result = yield from synchronized("call")
    if state.leak_check:
        check_leaks(state)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, Any, Any]:
    if _active(item) is None:
        return (yield)
    return (yield from synchronized("teardown"))
