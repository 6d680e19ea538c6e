"""torch.compile for vdev: Dynamo's device interface and Inductor's backend.

* ``device_interface``: ``VdevInterface``, Dynamo's view of the device (streams, events,
  synchronize, properties), registered when ``torch._dynamo`` is first imported;
* ``inductor_backend``: Inductor's C++ scheduling with a wrapper that queues each generated kernel
  on a vdev stream, registered once Inductor's ``compile_fx`` has been imported (every compilation
  imports it before lowering a graph);
* ``kernels``: compiling those kernels with their stream trampoline and loading them;
* ``graph_policy``: ``mode="reduce-overhead"``, the policy that hands compiled functions to vdev
  graphs, installed once Inductor's ``output_code`` has been imported (before Inductor can compile
  a graph or load one from its cache); ``graph_trees``: what a compiled function then does with
  its graphs (recording, replay, generations), as CUDA's cudagraph trees;
* ``torch_internals``: the one boundary with torch's private APIs: every module here reaches
  Dynamo's and Inductor's internals through it, and its manifest lists each reach.

None is imported by ``import torch`` (importing ``torch._dynamo`` costs over a second): all are
installed by post-import actions (``torch_vdev._post_import``: they run once the module they
wait for has been imported): the device interface once the
``torch._dynamo`` package has been imported, before anything is traced, and Inductor's backend
once ``torch._inductor.compile_fx`` has been. Nothing here is imported by ``torch.vdev``.
"""

from __future__ import annotations

import warnings

from torch_vdev._post_import import run_after_import as _run_after_import
from torch_vdev.compile import torch_internals

_DYNAMO = torch_internals.hooked_module("torch._dynamo")
# The module whose class reduce-overhead's policy patches (CompiledFxGraph). Once it has been
# imported, everything the policy imports has been too.
_OUTPUT_CODE = torch_internals.hooked_module("torch._inductor.output_code")
# What every compilation imports before it lowers a graph (and no torch module imports while
# Inductor initialises): once it has been imported, everything the backend imports has been too.
_COMPILE_FX = torch_internals.hooked_module("torch._inductor.compile_fx")


def _register_device_interface() -> None:
    """Registers vdev with Dynamo, then reduce-overhead's graph policy. A failure is a warning,
    not an ImportError: Dynamo must stay importable for every other device."""
    try:
        from torch_vdev.compile import device_interface

        device_interface.register()
    except Exception as e:  # noqa: BLE001
        warnings.warn(f"torch_vdev: torch.compile is not available for vdev: {e!r}", stacklevel=2)
        return
    # Dynamo is often imported by Inductor's own package while it initializes (``import
    # torch._inductor.config`` imports standalone_compile, which imports Dynamo): importing the
    # policy now would import Inductor modules that are still half-initialized. It is installed
    # once Inductor's output_code has been imported instead, which is before Inductor can compile
    # a graph or load one from its cache.
    _run_after_import(_OUTPUT_CODE, _install_graph_policy)


def _install_graph_policy() -> None:
    try:
        from torch_vdev.compile import graph_policy

        graph_policy.install()
    except Exception as e:  # noqa: BLE001
        warnings.warn(
            f'torch_vdev: torch.compile(mode="reduce-overhead") will not use vdev graphs: {e!r}',
            stacklevel=2,
        )


def _register_inductor_backend() -> None:
    """Registers vdev's Inductor backend. A failure is a warning, not an ImportError: Inductor
    must stay importable for every other device."""
    try:
        from torch_vdev.compile import inductor_backend

        inductor_backend.register()
    except Exception as e:  # noqa: BLE001
        warnings.warn(
            f"torch_vdev: Inductor cannot generate code for vdev: {e!r}",
            stacklevel=2,
        )


def install() -> None:
    """Registers vdev with Dynamo and Inductor now for those loaded, else when they are (called
    once, by torch_vdev._registration)."""
    _run_after_import(_DYNAMO, _register_device_interface)
    _run_after_import(_COMPILE_FX, _register_inductor_backend)
