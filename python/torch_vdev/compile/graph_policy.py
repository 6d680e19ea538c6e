"""torch.compile(mode="reduce-overhead") on vdev: the policy that hands Inductor's compiled
functions to vdev graphs (``torch.vdev.VdevGraph``), as CUDA's cudagraph trees replay CUDA graphs.

torch 2.13 hard-wires reduce-overhead to CUDA (``cudagraph_trees`` calls ``torch.cuda`` throughout,
and ``cudagraph_utils.check_multiple_devices_or_any_cpu_nodes`` disables graphs for any graph whose
one device is not "cuda"). Its extension point is ``torch._inductor.config.cudagraph_policy``: a
``CUDAGraphPolicy`` whose ``cudagraphify`` wraps each compiled function (forward, backward or
inference) that passed Inductor's checks (no CPU nodes, no input storage mutation, tensor inputs
only). vdev supplies ``VdevGraphPolicy`` and, through ``install()``:

* lets a graph whose one device is vdev pass the device check (while vdev's policy is the one in
  effect, so another policy never receives a vdev graph it cannot replay);
* makes ``VdevGraphPolicy`` the policy of vdev graphs only (``CompiledFxGraph.post_compile`` runs
  with it patched in), so CUDA graphs in the same process keep Inductor's own path.

A function with an operation CUDA graphs cannot hold (one that synchronizes or allocates by data,
a ``cudagraph_unsafe`` operator, data-dependent control flow) runs without graphs, as Inductor
decides for CUDA with ``graph_partition=False``: vdev does not partition a function around such
operations (Inductor's default for CUDA), it graphs whole functions.

What a wrapped function does with its graphs (recording, replay, generations, threads) is
graph_trees.py's. The patches are made through ``torch_internals``, which lists them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from torch_vdev.compile import torch_internals
from torch_vdev.compile.graph_trees import GraphedFunction

config = torch_internals.get("torch._inductor.config")
CUDAGraphPolicy = torch_internals.get("torch._inductor.cudagraph_utils.CUDAGraphPolicy")


class VdevGraphPolicy(CUDAGraphPolicy):
    """Inductor's graph policy for vdev graphs: wraps each compiled function in a
    ``GraphedFunction``."""

    def cudagraphify(
        self,
        model: Callable[..., Any],
        example_inputs: Sequence[Any],
        static_input_idxs: Sequence[int],
        *,
        device_index: int,
        is_backward: bool,
        is_inference: bool,
        **kwargs: Any,
    ) -> Callable[..., Any]:
        return GraphedFunction(
            model,
            static_input_idxs,
            device_index=device_index,
            is_backward=is_backward,
            is_inference=is_inference,
            **kwargs,
        )


POLICY = VdevGraphPolicy()

_installed = False


def _incompatible_operation() -> str | None:
    """Why the graph being lowered cannot be one vdev graph, as Inductor decides for CUDA with
    ``graph_partition=False``: an operation that synchronizes or allocates by data (CUDA's
    forbidden and ``cudagraph_unsafe`` operations, unbacked sizes) or data-dependent control flow.
    Inductor skips that check when it partitions graphs (its default), because its partitioned
    path runs such operations outside CUDA graphs; vdev graphs the whole function, so the
    function runs without graphs instead."""
    get_first_incompatible_cudagraph_node = torch_internals.get(
        "torch._inductor.utils.get_first_incompatible_cudagraph_node"
    )
    V = torch_internals.get("torch._inductor.virtualized.V")

    gm = V.graph.module
    node = get_first_incompatible_cudagraph_node(gm)
    if node is None:
        control_flow = (torch.ops.higher_order.cond, torch.ops.higher_order.while_loop)
        node = next((n for n in gm.graph.nodes if n.target in control_flow), None)
    if node is None:
        return None
    reason = f"skipping cudagraphs due to incompatible op {node.target}"
    if stack_trace := node.meta.get("stack_trace"):
        reason = f"{reason} Found from {stack_trace}"
    return reason


def install() -> None:
    """Lets vdev graphs through Inductor's device check and gives them ``POLICY`` (once; run when
    this module is imported, which torch_vdev.compile does once Dynamo and Inductor's output_code
    have been imported, before anything compiles or is loaded from Inductor's cache)."""
    global _installed
    if _installed:
        return
    _installed = True
    original_check = torch_internals.get(
        "torch._inductor.cudagraph_utils.check_multiple_devices_or_any_cpu_nodes"
    )

    @functools.wraps(original_check)
    def check_multiple_devices_or_any_cpu_nodes(mapping: dict[torch.device, Any]) -> str | None:
        devices = [d for d in mapping if d.type != "meta"]
        policy = config.cudagraph_policy
        if (
            len(devices) == 1
            and devices[0].type == "vdev"
            and (policy is None or isinstance(policy, VdevGraphPolicy))
        ):
            return _incompatible_operation()
        return original_check(mapping)

    torch_internals.patch(
        "torch._inductor.cudagraph_utils.check_multiple_devices_or_any_cpu_nodes",
        check_multiple_devices_or_any_cpu_nodes,
    )

    original_post_compile = torch_internals.get(
        "torch._inductor.output_code.CompiledFxGraph.post_compile"
    )

    @functools.wraps(original_post_compile)
    def post_compile(self: Any, *args: Any, **kwargs: Any) -> None:
        if "vdev" in self.device_types and config.cudagraph_policy is None:
            with config.patch(cudagraph_policy=POLICY):
                return original_post_compile(self, *args, **kwargs)
        return original_post_compile(self, *args, **kwargs)

    torch_internals.patch("torch._inductor.output_code.CompiledFxGraph.post_compile", post_compile)


install()
