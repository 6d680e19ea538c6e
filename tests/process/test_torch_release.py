"""A build of torch-vdev is for one torch release: the import-time check, the wheel's pin.

A real mismatch (a build for one release loaded by another) is shown by .ci/torch_release, which
installs another torch into a built environment; here the build's record is replaced before the
import, which runs the same check at the same point.
"""

import importlib.metadata

import torch

from child_process import run_python
from torch_vdev import _build_info
from torch_vdev._compat import mismatch_message
from torch_vdev._compat.releases import SUPPORTED, public_version


def test_this_build_is_for_the_installed_torch_and_pinned_to_it():
    assert public_version(_build_info.TORCH_VERSION) == public_version(torch.__version__)
    assert public_version(torch.__version__) in SUPPORTED
    requires = importlib.metadata.requires("torch-vdev") or []
    assert f"torch=={public_version(torch.__version__)}" in requires, requires


def test_mismatch_message_names_both_releases_and_the_fix():
    assert mismatch_message("2.14.1+cu130", "2.14.1+cpu", "0.1.0") is None  # same release
    message = mismatch_message("2.14.1", "2.15.0+cu132", "0.1.0")
    assert message.startswith(
        "torch-vdev 0.1.0 was built for torch 2.14.1; this environment has torch 2.15.0+cu132: "
        "reinstall torch-vdev (pip install --no-build-isolation"
    )
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in message


# Replaces the build's record before anything of torch_vdev is imported.
_FAKE_BUILD = """
import sys, types
fake = types.ModuleType("torch_vdev._build_info")
fake.TORCH_VERSION = "2.12.0"
sys.modules["torch_vdev._build_info"] = fake
"""


def test_import_torch_with_a_build_for_another_torch_fails_early_and_clearly():
    r = run_python(
        _FAKE_BUILD
        + """
import torch
"""
    )
    assert r.returncode == 1, r.stderr  # an exception, not a crash
    assert "Failed to load the backend extension: vdev" in r.stderr
    assert "was built for torch 2.12.0; this environment has torch " + torch.__version__ in r.stderr


def test_a_build_for_another_torch_registers_nothing_and_autoload_off_still_works():
    r = run_python(
        _FAKE_BUILD
        + """
import torch
assert torch._C._get_privateuse1_backend_name() == "privateuseone"
try:
    import torch_vdev
except RuntimeError as error:
    print("refused:", "was built for torch 2.12.0" in str(error))
# Nothing half-registered: no native library loaded, no device module, no renamed backend.
name = torch._C._get_privateuse1_backend_name()
print(name, "torch_vdev._C" in sys.modules, hasattr(torch, "vdev"))
print(torch.ones(2).sum().item())
""",
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["refused: True", "privateuseone False False", "2.0"]
