"""torch.compile's differences between the supported torch releases, for vdev's graphs
(``torch_vdev.compile.graph_trees``).

Inductor hands each compiled function to the graph policy's ``cudagraphify`` with keyword
arguments that grew with each release; vdev's ``GraphedFunction`` takes 2.13's and reads the
others through ``graph_policy_options``, which refuses one no release below passes (a new
release's argument is then noticed by tests/compile, not silently dropped).
"""

from __future__ import annotations

from typing import Any

# The arguments added after 2.13, with the release that added them and why vdev's graphs run the
# same without them.
POLICY_ARGUMENTS_SINCE_2_13: dict[str, tuple[str, str]] = {
    "kernel_free_cudagraph": (
        "2.14.1",
        "a graph without kernels: CUDA's trees capture nothing for it; vdev records and replays "
        "it as any other graph (an empty one), with the same output rules",
    ),
    "user_visible_output_idxs": (
        "2.14.1",
        "which outputs the user sees, for config.triton.cudagraph_trees_generation_cloning; vdev "
        "honours that setting by running without graphs (generation_cloning_reason)",
    ),
}
# torch 2.15's triton.cudagraph_managed_input_rerecord_limit / _action and
# cudagraph_initial_mempool_allocation_gb reach CUDA's own trees only (compile_fx.cudagraphify),
# not a policy: vdev's graphs always copy non-static inputs into their own buffers (the "copy"
# action from the first call) and their pools grow as recorded (the default, None).


def graph_policy_options(options: dict[str, Any]) -> None:
    """Accepts the keyword arguments of later releases that vdev's graphs do not need; raises
    TypeError, as a function call would, for one no supported release passes."""
    unknown = sorted(set(options) - set(POLICY_ARGUMENTS_SINCE_2_13))
    if unknown:
        raise TypeError(f"GraphedFunction() got unexpected keyword arguments {unknown}")


def generation_cloning_reason(config: Any) -> str | None:
    """Why a function must run without vdev graphs under torch 2.14's
    ``triton.cudagraph_trees_generation_cloning = "user_visible"``: CUDA's trees then clone the
    live outputs of the previous generation out of the graph pool instead of failing their next
    use; vdev's graphs do not clone, so they would report the overwritten-output error where a GPU
    runs correctly. Running without graphs never reports it (None: the setting is off or absent,
    as in 2.13)."""
    if getattr(config.triton, "cudagraph_trees_generation_cloning", None) is None:
        return None
    return (
        "skipping cudagraphs due to triton.cudagraph_trees_generation_cloning (vdev graphs do not "
        "clone the outputs of earlier generations)"
    )
