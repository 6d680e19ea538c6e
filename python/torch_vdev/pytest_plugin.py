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
"""

from __future__ import annotations

import gc
import os
import re
import sys
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

# The name `-p` and the pytest11 entry point give this module (one name: pluggy refuses a module
# registered twice under two names).
_NAME = __name__

# Mirrors cpp/runtime/config.h: the runtime would reject anything else, but only once torch is
# imported, where a bad value makes every test fail; checked here it is one usage error.
_MAX_DEVICES = 64
_UNITS = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}
_MEMORY_RE = re.compile(r"^\s*(\d+)\s*(?:([KMGT])(?:I?B)?|B)?\s*$", re.IGNORECASE)

# Frames of the harness around every test: noise in an allocation's stack.
_HARNESS_PATHS = (f"{os.sep}_pytest{os.sep}", f"{os.sep}pluggy{os.sep}", __file__)
_MAX_FRAMES = 8
_MAX_LISTED = 20

_state_key = pytest.StashKey["_State"]()


@dataclass
class _State:
    leak_check: bool
    hardware_applied: bool = False
    harnesses_enabled: bool = False
    harness_variables: dict[str, str] = field(default_factory=dict)  # those the plugin set
    # Per-test leak-check baseline: allocated bytes per device and the live blocks' identities.
    before_allocated: list[int] = field(default_factory=list)
    before_blocks: set[tuple[int, int, int]] = field(default_factory=set)


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
        help=f"number of simulated vdev devices, 1..{_MAX_DEVICES} (sets VDEV_DEVICE_COUNT; "
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


# --- enabling ------------------------------------------------------------------------------------


def _option(config: pytest.Config, dest: str) -> Any:
    # Before the full parse (pytest_load_initial_conftests) only known_args_namespace holds the
    # command line; config.option holds the defaults then (False for --vdev), so a default there
    # must not hide a flag given.
    value = getattr(config.option, dest, None)
    if not value:
        value = getattr(config.known_args_namespace, dest, None) or value
    return value


def _setting(config: pytest.Config, dest: str) -> str | None:
    """A hardware setting: the command line wins over the ini file; None when neither gives it."""
    value = _option(config, dest)
    if value is None:
        value = config.getini(dest) or None
    return None if value is None else str(value)


def _requested_by_name(config: pytest.Config) -> bool:
    """Whether ``-p torch_vdev.pytest_plugin`` or PYTEST_PLUGINS named this module: with the entry
    point installed, pytest loads it through the entry point even then, so being loaded says
    nothing."""
    named = list(_option(config, "plugins") or [])
    named += os.environ.get("PYTEST_PLUGINS", "").split(",")
    return any(name.strip() == _NAME for name in named)


def _loaded_by_entry_point(config: pytest.Config) -> bool:
    module = sys.modules[__name__]
    return any(plugin is module for plugin, _ in config.pluginmanager.list_plugin_distinfo())


def _enabled(config: pytest.Config) -> bool:
    if _requested_by_name(config) or not _loaded_by_entry_point(config):
        return True  # -p, PYTEST_PLUGINS, or pytest_plugins in a conftest: asked for by name
    if _option(config, "vdev") or config.getini("vdev"):
        return True
    return (
        _leak_check(config)
        or _bypass(config)
        or any(_setting(config, dest) is not None for dest in ("vdev_devices", "vdev_memory"))
    )


def _leak_check(config: pytest.Config) -> bool:
    return bool(_option(config, "vdev_leak_check") or config.getini("vdev_leak_check"))


def _bypass(config: pytest.Config) -> bool:
    return bool(
        _option(config, "vdev_bypass_device_restrictions")
        or config.getini("vdev_bypass_device_restrictions")
    )


# --- simulated hardware --------------------------------------------------------------------------


def _parse_devices(text: str) -> int:
    value = text.strip()
    if not value.isdigit() or not 1 <= int(value) <= _MAX_DEVICES:
        raise pytest.UsageError(
            f"--vdev-devices {text!r} is not a valid device count: expected an integer in "
            f"1..{_MAX_DEVICES}"
        )
    return int(value)


def _parse_memory(text: str) -> int:
    match = _MEMORY_RE.match(text)
    number = int(match.group(1)) if match else 0
    shift = _UNITS[(match.group(2) or "").upper()] if match else 0
    if number <= 0 or number > (2**64 - 1) >> shift:
        raise pytest.UsageError(
            f"--vdev-memory {text!r} is not a valid memory size: expected a positive number of "
            "bytes, optionally with a binary unit K, M, G or T (e.g. 512MiB, 4GiB, 2G)"
        )
    return number << shift


def _hardware(config: pytest.Config) -> list[tuple[str, str, str, int]]:
    """(option, variable, text, parsed value) for each hardware option given; raises UsageError
    for an invalid one, before anything is set."""
    wanted = []
    if (devices := _setting(config, "vdev_devices")) is not None:
        wanted.append(("--vdev-devices", "VDEV_DEVICE_COUNT", devices, _parse_devices(devices)))
    if (memory := _setting(config, "vdev_memory")) is not None:
        wanted.append(("--vdev-memory", "VDEV_DEVICE_MEMORY", memory, _parse_memory(memory)))
    return wanted


def _apply_hardware(config: pytest.Config) -> None:
    """Sets the runtime's variables while it has not read them yet (it reads them at the first
    device use), else checks that what it read is what was asked for."""
    state = config.stash[_state_key]
    if state.hardware_applied:
        return
    state.hardware_applied = True
    wanted = _hardware(config)
    if not wanted:
        return
    loaded = sys.modules.get("torch_vdev._C")
    if loaded is None or not loaded._config_read():
        for _, variable, text, _ in wanted:
            os.environ[variable] = text.strip()  # child processes (spawned ranks) inherit it
        return
    import torch

    error = sys.modules["torch_vdev._C"]._config_error()
    actual = {
        "VDEV_DEVICE_COUNT": None if error else torch.vdev.device_count(),
        "VDEV_DEVICE_MEMORY": None if error else torch.vdev.mem_get_info(0)[1],
    }
    for option, variable, text, value in wanted:
        if actual[variable] != value:
            raise pytest.UsageError(
                f"{option} {text}: too late, the vdev runtime already read its configuration "
                f"({variable}: {error or actual[variable]}): vdev was used before this plugin's "
                "pytest_load_initial_conftests hook (by another plugin, or by code run at its "
                f"import). Set {variable}={text.strip()} in pytest's environment instead"
            )


def _check_runtime_config(config: pytest.Config) -> None:
    """Loads torch (and vdev) now, so that a configuration the runtime refuses (a memory size
    this machine cannot reserve) is one usage error, not a failure of every test."""
    import torch  # noqa: F401  (autoloads torch_vdev, which reads the VDEV_* variables)

    import torch_vdev  # noqa: F401  (registers vdev when autoloading is off)
    from torch_vdev import _C

    error = _C._config_error()
    if error is None:
        return
    given = ", ".join(f"{option} {text}" for option, _, text, _ in _hardware(config))
    raise pytest.UsageError(
        f"the vdev runtime refused its configuration{f' ({given})' if given else ''}: {error}"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    # The earliest hook with the options parsed, and before the conftests (which import torch).
    if not _enabled(early_config):
        return
    early_config.stash[_state_key] = _State(leak_check=_leak_check(early_config))
    _apply_hardware(early_config)
    _enable_harnesses(early_config)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if not _enabled(config):
        return
    if _state_key not in config.stash:  # registered after the initial conftests were loaded
        config.stash[_state_key] = _State(leak_check=_leak_check(config))
    _apply_hardware(config)
    _enable_harnesses(config)
    _check_runtime_config(config)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    state = config.stash.get(_state_key, None)
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


# --- test harnesses ------------------------------------------------------------------------------


def _enable_harnesses(config: pytest.Config) -> None:
    """Points the libraries' harnesses at vdev (torch_vdev.testing), once the hardware is set: an
    adapter may count the devices."""
    state = config.stash[_state_key]
    if state.harnesses_enabled:
        return
    state.harnesses_enabled = True
    from torch_vdev import testing

    state.harness_variables = testing.enable()
    late = testing.read_before_set(state.harness_variables)
    if late:
        raise pytest.UsageError(
            f"{'; '.join(late)}. The plugin was loaded after a conftest had imported the harness "
            "(pytest_plugins in a conftest, with PYTEST_DISABLE_PLUGIN_AUTOLOAD set): load it "
            "with -p torch_vdev.pytest_plugin, or set the variable in pytest's environment"
        )
    if _bypass(config):
        testing.bypass_device_restrictions()


def pytest_unconfigure(config: pytest.Config) -> None:
    # The variables the plugin set go with the run (a pytest run inside a process goes on).
    state = config.stash.get(_state_key, None)
    for variable in state.harness_variables if state is not None else ():
        os.environ.pop(variable, None)


# --- synchronizing after each phase --------------------------------------------------------------


def _devices() -> range:
    # Never the first use of vdev: a test that did not touch the device has nothing queued.
    if "torch_vdev._C" not in sys.modules:
        return range(0)
    import torch

    return range(torch.vdev.device_count()) if torch.vdev.is_initialized() else range(0)


def _synchronize_all() -> list[tuple[int, BaseException]]:
    """Synchronizes every vdev device; returns the error each raised (each is raised once, so the
    devices are clean afterwards)."""
    import torch

    errors = []
    for d in _devices():
        try:
            torch.vdev.synchronize(d)
        except Exception as e:  # the queued operator's own type: IndexError, RuntimeError, ...
            errors.append((d, e))
    return errors


def _describe(errors: list[tuple[int, BaseException]], phase: str) -> str:
    devices = ", ".join(f"vdev:{d}" for d, _ in errors)
    lines = [
        f"vdev: device work queued by this test's {phase} failed on {devices}: the error was "
        f"raised when {_NAME} synchronized the device at the end of the "
        f"{phase} (without the plugin it would have failed the next test to synchronize)."
    ]
    lines += [f"  vdev:{d}: {type(e).__name__}: {e}" for d, e in errors]
    lines.append("Run the test with VDEV_LAUNCH_BLOCKING=1 to raise it at the call that queued it.")
    return "\n".join(lines)


def _synchronized(phase: str) -> Generator[None, Any, Any]:
    """The body of the phase wrappers: a phase that queued a failing operator fails; a phase that
    failed on its own keeps its failure, with the device error added as a note."""
    try:
        result = yield
    except pytest.skip.Exception as skipped:
        # A skip would hide the error: the device work was done, and it failed.
        errors = _synchronize_all()
        if errors:
            message = f"{_describe(errors, phase)}\n(The test then skipped: {skipped.msg})"
            raise pytest.fail.Exception(message, pytrace=False) from None
        raise
    except (Exception, pytest.fail.Exception, pytest.xfail.Exception) as failure:
        # Not KeyboardInterrupt or pytest.exit: the run is stopping, a device may be stuck.
        errors = _synchronize_all()
        if errors:
            failure.add_note(_describe(errors, phase))
        raise
    errors = _synchronize_all()
    if errors:
        pytest.fail(_describe(errors, phase), pytrace=False)
    return result


def _active(item: pytest.Item) -> _State | None:
    return item.config.stash.get(_state_key, None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, Any, Any]:
    if _active(item) is None:
        return (yield)
    return (yield from _synchronized("setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    state = _active(item)
    if state is None:
        return (yield)
    if state.leak_check:
        _record_baseline(state)
    result = yield from _synchronized("call")
    if state.leak_check:
        _check_leaks(state)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, Any, Any]:
    if _active(item) is None:
        return (yield)
    return (yield from _synchronized("teardown"))


# --- leak check ----------------------------------------------------------------------------------


def _allocated() -> list[int]:
    import torch

    return [torch.vdev.memory_allocated(d) for d in _devices()]


def _live_blocks() -> list[dict[str, Any]]:
    """The live allocations of every device, from the allocator's snapshot (what
    torch.vdev.memory._snapshot() shows PyTorch's memory viewer)."""
    import torch

    blocks = []
    for segment in torch.vdev.memory._snapshot()["segments"]:
        address = segment["address"]
        for block in segment["blocks"]:
            if block["state"] == "active_allocated":
                blocks.append(
                    {
                        "device": segment["device"],
                        "stream": segment["stream"],
                        "address": block.get("address", address),
                        "size": block["size"],
                        "requested_size": block.get("requested_size", block["size"]),
                        "frames": block.get("frames", []),
                    }
                )
            address += block["size"]
    return blocks


def _identity(block: dict[str, Any]) -> tuple[int, int, int]:
    return block["device"], block["address"], block["size"]


def _record_baseline(state: _State) -> None:
    state.before_allocated = _allocated()
    if any(state.before_allocated):
        gc.collect()  # garbage of earlier tests could be freed during this one and hide a leak
        state.before_allocated = _allocated()
    # Nothing allocated: every live block afterwards is new, no need for a snapshot now.
    state.before_blocks = (
        {_identity(b) for b in _live_blocks()} if any(state.before_allocated) else set()
    )


def _grown(state: _State) -> list[tuple[int, int, int]]:
    after = _allocated()
    # vdev not initialized when the test began: nothing was allocated then (no list either).
    before = state.before_allocated + [0] * (len(after) - len(state.before_allocated))
    return [(d, b, now) for d, (b, now) in enumerate(zip(before, after, strict=True)) if now > b]


def _check_leaks(state: _State) -> None:
    import torch

    _synchronize_all()  # done by the call wrapper already; frees wait on their streams
    gc.collect()
    grown = _grown(state)
    if grown:
        # As CudaMemoryLeakCheck: a block freed while a stream used it (record_stream) counts as
        # allocated until the allocator processes its events; empty_cache does, after waiting.
        gc.collect()
        torch.vdev.empty_cache()
        grown = _grown(state)
    if grown:
        pytest.fail(_leak_report(state, grown), pytrace=False)


def _leak_report(state: _State, grown: list[tuple[int, int, int]]) -> str:
    leaking = {d for d, _, _ in grown}
    live = [b for b in _live_blocks() if b["device"] in leaking]
    new = [b for b in live if _identity(b) not in state.before_blocks]
    lines = ["vdev leak check: the test ended with more device memory allocated than it began:"]
    lines += [
        f"  vdev:{d}: {now - before} bytes more ({before} -> {now} bytes allocated)"
        for d, before, now in grown
    ]
    if new:
        lines.append(f"Allocations made by the test and still alive ({len(new)}):")
        listed = new
    else:
        # An address freed and reused by the test: it cannot be told apart, so all are listed.
        lines.append(f"Allocations alive on the device(s) ({len(live)}; the test's among them):")
        listed = live
    for block in listed[:_MAX_LISTED]:
        lines.append(
            f"  vdev:{block['device']} {_stream(block['stream'])}: {block['size']} bytes "
            f"({block['requested_size']} requested) at {block['address']:#x}"
        )
        lines += [f"    {frame}" for frame in _python_frames(block["frames"])]
    if len(listed) > _MAX_LISTED:
        lines.append(f"  ... and {len(listed) - _MAX_LISTED} more")
    if not any(block["frames"] for block in listed):
        lines.append(
            "Where each was allocated: record memory history, e.g. "
            'torch.vdev.memory._record_memory_history(stacks="python") in a session fixture.'
        )
    lines.append(
        "Tensors kept alive by the test (a module-level cache, a global list, a reference cycle "
        "holding a frame) free their memory only when released."
    )
    return "\n".join(lines)


def _stream(stream: int) -> str:
    return "stream 0 (the default stream)" if stream == 0 else f"stream {stream}"


def _python_frames(frames: Iterable[dict[str, Any]]) -> list[str]:
    """A block's Python frames from the allocation up to the test (the harness's frames below it
    are noise), most recent call last as in a traceback. The snapshot lists the innermost frame
    first and, with stacks="all", C++ frames among them."""
    shown: list[dict[str, Any]] = []
    for f in frames:
        if any(p in f["filename"] for p in _HARNESS_PATHS):
            break  # pytest calling the test: what follows is the harness and the interpreter
        if f["filename"].endswith(".py") or f["filename"].startswith("<"):
            shown.append(f)
    return [
        f'File "{f["filename"]}", line {f["line"]}, in {f["name"]}' for f in shown[:_MAX_FRAMES]
    ][::-1]
