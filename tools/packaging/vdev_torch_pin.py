"""scikit-build-core metadata provider (``[tool.scikit-build.metadata.dependencies]``): pins the
wheel to the torch it is compiled against.

``dependencies`` is ``torch==<the build's torch>`` plus the static ones listed in pyproject.toml
(``also``). The torch of the build is the one in the build environment, read from its metadata
without importing it (an import costs seconds and would autoload an installed torch-vdev).

Which torch an isolated build gets is ``get_requires_for_dynamic_metadata``'s answer:

* ``VDEV_TORCH_RELEASE``, when set (a supported release): for front ends that build in an
  environment of their own (``python -m build``, uv) and so cannot see the target's torch;
* else the torch already installed where the wheel is going, so that ``pip install .`` does not
  replace it: pip runs this hook with the target environment's interpreter, whose site-packages
  (purelib and platlib) stay readable under build isolation. An unsupported torch there is
  refused here, naming the supported releases, rather than replaced by the default;
* else ``DEFAULT`` of python/torch_vdev/_compat/releases.py (a fresh environment).

``pip install --no-build-isolation .`` does not call the hook: the build uses the torch installed.
"""

from __future__ import annotations

import importlib.metadata
import os
import runpy
import sysconfig
from pathlib import Path

_RELEASES = runpy.run_path(
    str(Path(__file__).resolve().parents[2] / "python/torch_vdev/_compat/releases.py")
)
SUPPORTED: tuple[str, ...] = _RELEASES["SUPPORTED"]
DEFAULT: str = _RELEASES["DEFAULT"]
public_version = _RELEASES["public_version"]


def _torch_version(path: list[str] | None = None) -> str | None:
    search = {"name": "torch"} if path is None else {"name": "torch", "path": path}
    for dist in importlib.metadata.distributions(**search):
        return dist.version
    return None


def _unsupported(version: str, where: str) -> RuntimeError:
    return RuntimeError(
        f"torch-vdev builds against torch {', '.join(SUPPORTED)}; {where} has torch {version}. "
        f"Install one of those first (pip install torch=={SUPPORTED[-1]})."
    )


def get_requires_for_dynamic_metadata(settings: dict | None = None) -> list[str]:
    asked = os.environ.get("VDEV_TORCH_RELEASE")
    if asked:
        if asked not in SUPPORTED:
            raise _unsupported(asked, "VDEV_TORCH_RELEASE")
        return [f"torch=={asked}"]
    paths = sysconfig.get_paths()
    target = _torch_version(list(dict.fromkeys([paths["purelib"], paths["platlib"]])))
    if target is None:
        return [f"torch=={DEFAULT}"]
    if public_version(target) not in SUPPORTED:
        raise _unsupported(target, "the environment torch-vdev is installed into")
    return [f"torch=={public_version(target)}"]


def dynamic_metadata(field: str, settings: dict | None = None) -> list[str]:
    if field != "dependencies":
        raise RuntimeError(f"vdev_torch_pin provides 'dependencies', not {field!r}")
    version = _torch_version()
    if version is None:
        raise RuntimeError(
            "torch-vdev compiles against an installed torch, and the build environment has none: "
            f"pip install torch=={DEFAULT} first (supported: {', '.join(SUPPORTED)})"
        )
    if public_version(version) not in SUPPORTED:
        raise _unsupported(version, "the build environment")
    also = list((settings or {}).get("also", []))
    return [f"torch=={public_version(version)}", *also]
