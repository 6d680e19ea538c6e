"""The bookkeeping of torch.compile(mode="reduce-overhead") on vdev, as CUDA's cudagraph trees
(``torch._inductor.cudagraph_trees``) keep it: each compiled function Inductor hands to vdev's
policy (graph_policy.py) becomes a ``GraphedFunction``, whose calls are recorded into and replayed
as vdev graphs (``torch.vdev.VdevGraph``), with the trees' generations and thread rules.

What a wrapped function does (``GraphedFunction``), following cudagraph trees' rules:

* The first call for each tuple of integer inputs (the sizes of dynamic shapes) runs the function
  as compiled (the warm-up). The next records it into a vdev graph with its own private pool, then
  replays it; later calls copy the non-static inputs into the graph's input buffers and replay.
  The warm-up's outputs belong to its generation as a replay's do (below).
  Static inputs (parameters, buffers, marked static addresses) are read in place; if one moves,
  the graph is recorded again, up to ``triton.cudagraph_unexpected_rerecord_limit`` times.
* A function that mutates a non-static input runs without graphs ("skipping cudagraphs due to
  mutated inputs"), as on CUDA; so does every function while torch 2.14's
  ``triton.cudagraph_trees_generation_cloning`` is set (torch_vdev._compat.compile).
* Outputs live in the graph's memory. Each replay hands out new, non-owning storages over it. A new
  *generation* (a new top-level ``torch.compile`` call, unless a forward still waits for its
  backward, or a ``torch.compiler.cudagraph_mark_step_begin()``) marks every output storage of the
  previous one: any later access raises "accessing tensor output of a vdev graph that has been
  overwritten by a subsequent run", CUDA's error. Within a generation a graph whose outputs are
  still alive is not replayed over them: a second instance is recorded (gradient accumulation runs
  several forwards before their backwards), up to ``MAX_INSTANCES``.
* Outputs still alive when their graph is freed (``torch._dynamo.reset()``) are marked too.

Thread rules: as cudagraph trees, every thread has its own instances, generations and capture
stream, so threads never share a graph's memory. The state is stashed in torch's thread-local state
(``torch._C._stash_obj_in_tls``), which autograd copies into its device threads, so a backward
belongs to the thread that ran its forward.

What this module takes from torch (the trees' helpers, storages from weak references, the
thread-local state) is listed in ``torch_internals``.
"""

from __future__ import annotations

import functools
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from torch_vdev._compat.compile import generation_cloning_reason, graph_policy_options
from torch_vdev.compile import torch_internals

config = torch_internals.get("torch._inductor.config")
get_mutation_stack_trace = torch_internals.get(
    "torch._inductor.cudagraph_utils.get_mutation_stack_trace"
)
log_cudagraph_skip_and_bump_counter = torch_internals.get(
    "torch._inductor.cudagraph_utils.log_cudagraph_skip_and_bump_counter"
)
maybe_warning_due_to_dynamic_shape = torch_internals.get(
    "torch._inductor.cudagraph_utils.maybe_warning_due_to_dynamic_shape"
)
StorageWeakRef = torch_internals.get("torch.multiprocessing.reductions.StorageWeakRef")
_storage_from_weak_ref = torch_internals.get("torch.UntypedStorage._new_with_weak_ptr")
_storage_over = torch_internals.get("torch._C._construct_storage_from_data_pointer")
_is_key_in_tls = torch_internals.get("torch._C._is_key_in_tls")
_get_obj_in_tls = torch_internals.get("torch._C._get_obj_in_tls")
_stash_obj_in_tls = torch_internals.get("torch._C._stash_obj_in_tls")

# Graph instances one function may hold for one tuple of sizes within a generation. Beyond it the
# function runs without graphs (with a warning), which bounds memory when forwards never see their
# backward.
MAX_INSTANCES = 8

_FREED = (
    "Error: accessing tensor output of a vdev graph (torch.compile mode='reduce-overhead') whose "
    "graph has been freed (torch._dynamo.reset(), or the compiled function was dropped). Clone "
    "outputs that must outlive the compiled function."
)

_OVERWRITTEN = (
    "Error: accessing tensor output of a vdev graph (torch.compile mode='reduce-overhead') that "
    "has been overwritten by a subsequent run. Stack trace: {trace}. To prevent overwriting, clone "
    "the tensor outside of torch.compile() or call torch.compiler.cudagraph_mark_step_begin() "
    "before each model invocation."
)


@functools.cache
def _mark_step_box() -> Any:
    # Not at import: this module is imported while Inductor's codecache initialises, and
    # cudagraph_trees imports compile_fx, which needs it whole.
    return torch_internals.get("torch._inductor.cudagraph_trees.MarkStepBox")


@functools.cache
def _generation_tracker() -> Any:
    return torch_internals.get("torch._dynamo.mutation_guard.GenerationTracker")


def _current_generation() -> int:
    """cudagraph trees' generation: the mark-step counter once the user has marked a step, else
    Dynamo's count of top-level compiled calls."""
    generation_tracker, mark_step_box = _generation_tracker(), _mark_step_box()
    if mark_step_box.mark_step_counter != 0:
        return mark_step_box.mark_step_counter
    return generation_tracker.generation


def _user_marked_steps() -> bool:
    return _mark_step_box().mark_step_counter != 0


def _mark_overwritten(refs: Sequence[StorageWeakRef], message: str) -> None:
    for ref in refs:
        storage = _storage_from_weak_ref(ref.cdata)
        if storage is not None:
            torch.ops.vdev._mark_overwritten(storage, message)


class _DeviceGenerations:
    """Per thread and device: the current generation, whether a forward waits for its backward, and
    the output storages handed out in this generation (weakly: a dead storage needs no marking)."""

    def __init__(self) -> None:
        self.generation: int | None = None
        self.pending_backward = False
        self.handed_out: list[tuple[StorageWeakRef, str]] = []

    def enter_call(self) -> None:
        generation = _current_generation()
        if generation == self.generation:
            return
        if self.pending_backward and not _user_marked_steps():
            return  # a forward's outputs wait for its backward: same generation, as trees
        self.generation = generation
        self.pending_backward = False
        handed_out, self.handed_out = self.handed_out, []
        for ref, message in handed_out:
            _mark_overwritten((ref,), message)

    def hand_out(self, refs: Sequence[StorageWeakRef], message: str) -> None:
        self.handed_out.extend((ref, message) for ref in refs)
        if len(self.handed_out) > _PRUNE_AT:  # forwards without backward: one long generation
            self.handed_out = [(r, m) for r, m in self.handed_out if not r.expired()]


# Handed-out storages are pruned of dead ones when a generation holds more than this many.
_PRUNE_AT = 4096


class _ThreadState:
    """What one thread owns, as CUDA's cudagraph trees (one tree per thread and device): threads
    never share a graph's memory, its generations or its capture stream."""

    def __init__(self) -> None:
        self.generations: dict[int, _DeviceGenerations] = {}
        self.capture_streams: dict[int, torch.Stream] = {}
        # per function: warm-up keys, instances, re-records
        self.functions: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


_TLS_KEY = "torch_vdev_graph_policy"


def _thread_state() -> _ThreadState:
    """This thread's state. It is stashed in torch's thread-local state, as the trees' is, because
    autograd copies that into its device threads: a backward then finds the state of the thread that
    ran its forward (a Python threading.local would give it a state of its own)."""
    if _is_key_in_tls(_TLS_KEY):
        return _get_obj_in_tls(_TLS_KEY)
    state = _ThreadState()
    _stash_obj_in_tls(_TLS_KEY, state)
    return state


def _device_generations(index: int) -> _DeviceGenerations:
    generations = _thread_state().generations
    if index not in generations:
        generations[index] = _DeviceGenerations()
    return generations[index]


def _int_key(inputs: Sequence[Any]) -> tuple[Any, ...]:
    """What selects a graph besides the compiled function: its integer inputs (dynamic sizes) and
    the identity of generator inputs."""
    return tuple(
        x if isinstance(x, int) else id(x) for x in inputs if not isinstance(x, torch.Tensor)
    )


class _Recording:
    """One vdev graph of a function: its input buffers, the graph, how to hand out its outputs."""

    def __init__(self, fn: GraphedFunction, inputs: list[Any]) -> None:
        from torch_vdev.vdev.graphs import VdevGraph, graph

        index_expanded_dims_and_copy_ = torch_internals.get(
            "torch._inductor.compile_fx.index_expanded_dims_and_copy_"
        )
        static_input = torch_internals.get("torch._inductor.compile_fx.static_input")
        get_expanded_dims = torch_internals.get("torch._inductor.output_code.get_expanded_dims")

        # Not the function itself: a reference cycle would keep graphs and buffers until the
        # cyclic collector runs.
        self.device_index = fn.device_index
        self.overwritten_message = fn.overwritten_message
        self.device = torch.device("vdev", fn.device_index)
        self.generation: int | None = None
        self.handed_out: list[StorageWeakRef] = []  # of the last replay; updated in place
        # A dropped recording releases its pool: outputs still alive must not read memory that
        # later work may be given.
        weakref.finalize(self, _mark_overwritten, self.handed_out, _FREED)
        static = fn.static_input_idxs
        self.static_idxs = [
            i for i, x in enumerate(inputs) if i in static and isinstance(x, torch.Tensor)
        ]
        self.static_ptrs = [inputs[i].data_ptr() for i in self.static_idxs]
        self.copy_idxs = [
            i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and i not in static
        ]
        self.expanded = {i: get_expanded_dims(inputs[i]) for i in self.copy_idxs}
        self.buffers: list[Any] = list(inputs)
        for i in self.copy_idxs:
            self.buffers[i] = static_input(inputs[i])
            index_expanded_dims_and_copy_(self.buffers[i], inputs[i], self.expanded[i])
        self._copy = index_expanded_dims_and_copy_
        inputs.clear()

        self.graph = VdevGraph()
        with torch.vdev.device(fn.device_index):
            with graph(self.graph, stream=fn.capture_stream(), capture_error_mode="thread_local"):
                outputs = fn.model(list(self.buffers))
        self._describe_outputs(outputs, fn.constants)
        # Keep the input buffers only: static inputs are read in place (their addresses are kept).
        self.buffers = [b if i in self.expanded else None for i, b in enumerate(self.buffers)]

    def _describe_outputs(self, outputs: Any, constants: Sequence[torch.Tensor]) -> None:
        """Outputs on the graph's memory (allocated by the capture, or an input buffer) are handed
        out as new storages per replay; outputs on a static input or a constant are returned as
        they are; ints and None too."""
        if not isinstance(outputs, (list, tuple)):
            outputs = (outputs,)
        kept = {self.buffers[i].untyped_storage().data_ptr() for i in self.static_idxs}
        kept |= {c.untyped_storage().data_ptr() for c in constants}
        self.storages: list[tuple[int, int]] = []  # (address, bytes) of each graph storage
        index_of: dict[int, int] = {}
        self.outputs: list[tuple[Any, ...]] = []
        for out in outputs:
            if not isinstance(out, torch.Tensor) or out.untyped_storage().data_ptr() in kept:
                self.outputs.append(("as is", out))
                continue
            storage = out.untyped_storage()
            address = storage.data_ptr()
            if address not in index_of:
                index_of[address] = len(self.storages)
                self.storages.append((address, storage.nbytes()))
            self.outputs.append(
                (
                    "graph",
                    index_of[address],
                    out.dtype,
                    out.storage_offset(),
                    out.size(),
                    out.stride(),
                )
            )

    def static_inputs_moved(self, inputs: list[Any]) -> bool:
        pairs = zip(self.static_idxs, self.static_ptrs, strict=True)
        return any(inputs[i].data_ptr() != address for i, address in pairs)

    def outputs_alive(self) -> bool:
        return any(not ref.expired() for ref in self.handed_out)

    def replay(self, inputs: list[Any] | None) -> list[Any]:
        if inputs is not None:
            for i in self.copy_idxs:
                self._copy(self.buffers[i], inputs[i], self.expanded[i])
            inputs.clear()
        self.graph.replay()
        return self._hand_out()

    def _hand_out(self) -> list[Any]:
        storages = [
            _storage_over(address, self.device, nbytes) for address, nbytes in self.storages
        ]
        self.handed_out[:] = [StorageWeakRef(s) for s in storages]
        _device_generations(self.device_index).hand_out(self.handed_out, self.overwritten_message)
        result: list[Any] = []
        for spec in self.outputs:
            if spec[0] == "as is":
                result.append(spec[1])
                continue
            _, index, dtype, offset, size, stride = spec
            out = torch.empty(0, dtype=dtype, device=self.device)
            result.append(out.set_(storages[index], offset, size, stride))
        return result


class _FunctionState:
    """One function's graphs on one thread."""

    def __init__(self) -> None:
        self.warmed_up: set[tuple[Any, ...]] = set()
        self.instances: dict[tuple[Any, ...], list[_Recording]] = {}
        self.rerecords = 0


class GraphedFunction:
    """A compiled function that runs as vdev graphs (see the module's docstring). Called by
    Inductor with the boxed convention: one list of inputs, which the call empties."""

    _boxed_call = True

    def __init__(
        self,
        model: Callable[[list[Any]], Any],
        static_input_idxs: Sequence[int],
        *,
        device_index: int,
        is_backward: bool,
        is_inference: bool,
        stack_traces: Sequence[str | None] = (),
        constants: Sequence[torch.Tensor] = (),
        placeholders: Sequence[Any] = (),
        mutated_input_idxs: Sequence[int] = (),
        **later_releases_options: Any,  # torch_vdev._compat.compile.graph_policy_options
    ) -> None:
        graph_policy_options(later_releases_options)
        self.model = model
        self.static_input_idxs = frozenset(static_input_idxs)
        self.device_index = device_index
        self.is_backward = is_backward
        self.is_forward = not is_backward and not is_inference
        traces = [t.strip() for t in stack_traces if t]
        self.overwritten_message = _OVERWRITTEN.format(
            trace=traces[0] if traces else "[Could not find stack trace]"
        )
        self.constants = tuple(constants)
        self.warned_instances = False
        mutated = [i for i in mutated_input_idxs if i not in self.static_input_idxs]
        cloning = generation_cloning_reason(config)
        self.disabled = bool(mutated) or cloning is not None
        if mutated:
            log_cudagraph_skip_and_bump_counter(get_mutation_stack_trace(placeholders, mutated))
        elif cloning is not None:
            log_cudagraph_skip_and_bump_counter(cloning)

    def capture_stream(self) -> torch.Stream:
        return _capture_stream(self.device_index)

    def _state(self) -> Any:
        functions = _thread_state().functions
        state = functions.get(self)
        if state is None:
            state = functions[self] = _FunctionState()
        return state

    def __call__(self, inputs: list[Any]) -> Any:
        generations = _device_generations(self.device_index)
        try:
            if self.disabled:
                return self.model(inputs)
            if not self.is_backward:  # a backward belongs to its forward's generation
                generations.enter_call()
            return self._run(inputs, generations)
        finally:
            if self.is_forward:
                generations.pending_backward = True
            elif self.is_backward:
                generations.pending_backward = False

    def _run(self, inputs: list[Any], generations: _DeviceGenerations) -> Any:
        state = self._state()
        key = _int_key(inputs)
        if key not in state.warmed_up:
            inputs_and_constants = {
                x.untyped_storage().data_ptr()
                for x in (*inputs, *self.constants)
                if isinstance(x, torch.Tensor)
            }
            out = self.model(inputs)
            state.warmed_up.add(key)
            # cudagraph trees run the warm-up in the graphs' pool and free its outputs when the
            # next generation begins (CUDAWarmupNode, dealloc_current_path_weakrefs): a warm-up
            # output kept past the next call raises the overwritten error too.
            generations.hand_out(
                [
                    StorageWeakRef(o.untyped_storage())
                    for o in (out if isinstance(out, (list, tuple)) else (out,))
                    if isinstance(o, torch.Tensor)
                    and o.device.type == "vdev"
                    and o.untyped_storage().data_ptr() not in inputs_and_constants
                ],
                self.overwritten_message,
            )
            return out
        instances = state.instances.get(key)
        if instances is None:
            maybe_warning_due_to_dynamic_shape(state.instances, key)
            instances = state.instances[key] = []
        # Instances are kept in order of last use. One is free unless it ran in this generation
        # and its outputs are alive; a free one fits if the static inputs are where it reads them.
        generation = generations.generation
        free = [r for r in instances if r.generation != generation or not r.outputs_alive()]
        chosen = next((r for r in free if not r.static_inputs_moved(inputs)), None)
        if chosen is not None:
            instances.remove(chosen)
        else:
            if free:  # static inputs moved (a parameter, or a backward's saved forward outputs)
                state.rerecords += 1
                limit = config.triton.cudagraph_unexpected_rerecord_limit
                if state.rerecords > limit:
                    self.disabled = True
                    log_cudagraph_skip_and_bump_counter(
                        "skipping cudagraphs due to static input data pointers changing more than "
                        f"{limit} times (triton.cudagraph_unexpected_rerecord_limit)"
                    )
                    return self.model(inputs)
            if len(instances) >= MAX_INSTANCES:
                if not free:
                    self._warn_live_outputs()
                    return self.model(inputs)
                instances.remove(free[0])  # the least recently used
            chosen = _Recording(self, inputs)
            inputs = None  # the recording copied them
        instances.append(chosen)
        chosen.generation = generation
        return chosen.replay(inputs)

    def _warn_live_outputs(self) -> None:
        if self.warned_instances:
            return
        self.warned_instances = True
        warnings.warn(
            f"torch.compile(mode='reduce-overhead') on vdev: {MAX_INSTANCES} graphs of one "
            "function hold live outputs in this step, so it runs without graphs. Ensure backward() "
            "is invoked or detach outputs, or call torch.compiler.cudagraph_mark_step_begin() "
            "before each model invocation.",
            stacklevel=3,
        )


def _capture_stream(index: int) -> torch.Stream:
    """One side stream per thread and device to capture on (torch.vdev.graph's default is one
    stream of the device current when it was first used, shared by every thread)."""
    streams = _thread_state().capture_streams
    if index not in streams:
        streams[index] = torch.vdev.Stream(device=index)
    return streams[index]
