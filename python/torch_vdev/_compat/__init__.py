"""Where torch releases differ for vdev: the import-time release check, and one module per layer
for the differences between the supported releases (``releases.SUPPORTED``), so that the rest of
torch_vdev reads as if there were one torch.

Modules: ``releases`` (the supported releases; imports nothing), ``compile`` (Inductor's graph
policy). The C++ layers' differences are in cpp/backend/common/torch_release.h; the private torch
APIs vdev reaches, with the releases each was verified against, in
torch_vdev/compile/torch_internals.py. docs/torch-releases.md lists what each release changes.
"""

from __future__ import annotations

from torch_vdev._compat.releases import SUPPORTED, public_version


def mismatch_message(built_for: str, installed: str, vdev_version: str) -> str | None:
    """The error for a torch-vdev build loaded by another torch release, None when they match."""
    if public_version(built_for) == public_version(installed):
        return None
    return (
        f"torch-vdev {vdev_version} was built for torch {public_version(built_for)}; this "
        f"environment has torch {installed}: reinstall torch-vdev (pip install "
        f"--no-build-isolation <torch-vdev checkout>, which builds against the installed torch; "
        f"torch-vdev supports torch {', '.join(SUPPORTED)}). To import torch without vdev: "
        f"TORCH_DEVICE_BACKEND_AUTOLOAD=0"
    )


def check_torch_release() -> None:
    """Raises before anything is registered (nor libtorch_vdev loaded: its symbols are one
    release's) when this build of torch-vdev is not for the installed torch."""
    import torch

    from torch_vdev import _version

    try:
        from torch_vdev import _build_info
    except ImportError as error:  # a source tree on sys.path without a build
        raise RuntimeError(
            "torch-vdev is not built: its _build_info module (written by the build) is missing; "
            "install it with pip install --no-build-isolation <torch-vdev checkout>"
        ) from error
    message = mismatch_message(_build_info.TORCH_VERSION, torch.__version__, _version.VERSION)
    if message is not None:
        raise RuntimeError(message)
