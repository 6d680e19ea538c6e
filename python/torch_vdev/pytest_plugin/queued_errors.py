"""Queued errors: every vdev device is synchronized at the end of each phase of a test, inside the
phase, so an error its device work raised fails that test, naming the device."""

from __future__ import annotations

import sys
from collections.abc import Generator
from typing import Any

import pytest

from torch_vdev.pytest_plugin.settings import PLUGIN_NAME


def devices() -> range:
    # Never the first use of vdev: a test that did not touch the device has nothing queued.
    if "torch_vdev._C" not in sys.modules:
        return range(0)
    import torch

    return range(torch.vdev.device_count()) if torch.vdev.is_initialized() else range(0)


def synchronize_all() -> list[tuple[int, BaseException]]:
    """Synchronizes every vdev device; returns the error each raised (each is raised once, so the
    devices are clean afterwards). A device a device-side assert made unusable (as a CUDA device
    stays, cpp/runtime/device_assert.h) is first made usable again for the next test, which only
    vdev can do: what its streams still hold is raised, the lasting state is not (a test that
    caught the assert has handled it); the failure is kept for _describe_asserts."""
    import torch

    import torch_vdev._C as C

    errors = []
    for d in devices():
        # Cleared before the synchronize (else it raises the lasting state) and after it (work
        # that failed while it waited, whose own error the synchronize raised).
        for clear_after in (False, True):
            if clear_after:
                try:
                    torch.vdev.synchronize(d)
                except Exception as e:  # the operator's own type: IndexError, AcceleratorError, ...
                    errors.append((d, e))
            if (failure := C._clear_device_assert(d)) is not None:
                _cleared_asserts.append((d, failure))
    return errors


# Device-side asserts cleared by synchronize_all since the phase began: (device, first failure).
_cleared_asserts: list[tuple[int, str]] = []


def _describe_asserts() -> str | None:
    if not _cleared_asserts:
        return None
    lines = [
        "vdev: a device-side assert queued by this test made its device unusable, as a CUDA device "
        "stays for the rest of the process (every later operation on it raised "
        f"torch.AcceleratorError); {PLUGIN_NAME} made it usable again for the next test."
    ]
    lines += [f"  vdev:{d}: first failure: {failure}" for d, failure in _cleared_asserts]
    return "\n".join(lines)


def _describe(errors: list[tuple[int, BaseException]], phase: str) -> str:
    devices = ", ".join(f"vdev:{d}" for d, _ in errors)
    lines = [
        f"vdev: device work queued by this test's {phase} failed on {devices}: the error was "
        f"raised when {PLUGIN_NAME} synchronized the device at the end of the "
        f"{phase} (without the plugin it would have failed the next test to synchronize)."
    ]
    lines += [f"  vdev:{d}: {type(e).__name__}: {e}" for d, e in errors]
    lines.append("Run the test with VDEV_LAUNCH_BLOCKING=1 to raise it at the call that queued it.")
    return "\n".join(lines)


def synchronized(phase: str) -> Generator[None, Any, Any]:
    """The body of the phase wrappers: a phase that queued a failing operator fails; a phase that
    failed on its own keeps its failure, with the device error added as a note (and, when a
    device-side assert of the phase made a device unusable, what the assert was)."""
    _cleared_asserts.clear()
    try:
        result = yield
    except pytest.skip.Exception as skipped:
        # A skip would hide the error: the device work was done, and it failed.
        errors = synchronize_all()
        if errors:
            message = f"{_describe(errors, phase)}\n(The test then skipped: {skipped.msg})"
            raise pytest.fail.Exception(message, pytrace=False) from None
        raise
    except (Exception, pytest.fail.Exception, pytest.xfail.Exception) as failure:
        # Not KeyboardInterrupt or pytest.exit: the run is stopping, a device may be stuck.
        errors = synchronize_all()
        if errors:
            failure.add_note(_describe(errors, phase))
        if (asserts := _describe_asserts()) is not None:
            failure.add_note(asserts)
        raise
    errors = synchronize_all()
    if errors:
        message = _describe(errors, phase)
        if (asserts := _describe_asserts()) is not None:
            message += "\n" + asserts
        pytest.fail(message, pytrace=False)
    return result
