"""Shared test helpers and the bounded hypothesis profile used in CI."""

import os

import pytest
import torch
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile("dev", max_examples=300, stateful_step_count=80, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _restore_current_device():
    """Every test starts and ends on vdev:0, so that a failing test cannot leak its device."""
    torch.vdev.set_device(0)
    yield
    torch.vdev.set_device(0)


@pytest.fixture(autouse=True)
def _usable_devices():
    """A device-side assert makes its device unusable for the rest of the process, as on CUDA
    (cpp/runtime/device_assert.h): each test leaves every device usable for the next, as the pytest
    plugin does for a library's tests."""
    yield
    import torch_vdev._C as C

    for d in range(torch.vdev.device_count()):
        C._clear_device_assert(d)


@pytest.fixture(scope="session")
def device_count() -> int:
    n = torch.vdev.device_count()
    assert n >= 2, "the suite needs at least 2 vdev devices (VDEV_DEVICE_COUNT >= 2)"
    return n
