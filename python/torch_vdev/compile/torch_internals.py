"""The one boundary between vdev's torch.compile support and torch's private APIs.

torch.compile has no registration for an out-of-tree device that generates C++ kernels and
replays graphs, so vdev reaches into Dynamo's and Inductor's internals: it derives classes from
them, calls them, rebinds a few of their predicates and reads their state. Every such reach made by
``python/torch_vdev/compile/`` (and the one made by ``bindings/compile.cpp``) is an entry of
``MANIFEST`` (what vdev does with the target, why, against which torch version it was verified),
and every module there reaches torch's internals through this one, by target name:

* ``get(target)``: the object (a module, class, function or value), resolved when asked, so that
  no Inductor module is imported before its caller would have imported it;
* ``patch(target, replacement)`` / ``patch_item(target, key, replacement)``: replaces an attribute
  (or a table entry) and keeps the original (``original(target)``);
* ``hooked_module(target)``: the name of a module whose import runs a vdev action
  (``torch_vdev.compile``'s post-import hook).

A name that is not in the manifest raises ``KeyError``: a new reach gets its entry first.
``tests/compile/test_torch_internals.py`` checks that every target still exists, with the members
vdev uses and the signature recorded here for the installed release, that every entry is used
where it says, and that no other module of ``torch_vdev.compile`` reaches torch's internals
directly. Supporting a new torch release starts here: run that test against it, re-verify each
entry against the new sources, and add the release to the entry's ``verified`` (and a signature
that changed to its ``signature`` table); ``torch_vdev._compat.compile`` takes what differs.

Private uses outside torch.compile stay where they are (they are not compile-related); they are
listed in ``ELSEWHERE`` and existence-checked by the same test:

* ``_registration.py``: ``torch._register_device_module`` (torch's documented way to install a
  device module), ``UninitializedTensorMixin._allowed_methods`` (``LazyLinear(2).vdev()``) and
  ``torch.autograd._supported_activities`` (wrapped: no vdev activity while vdev is unavailable);
* ``vdev/_sharing.py``: ``torch._utils._rebuild_tensor`` and ``torch.multiprocessing.reductions``'
  storage cache (vdev tensors sent to other processes), and the standard library's
  ``ForkingPickler._extra_reducers``;
* ``vdev/_capability.py``: ``torch._tensor_str.tensor_totype`` (wrapped: printing on a device
  without float64, ``VDEV_PROFILE=mps``, as torch prints MPS tensors);
* ``vdev/graphs.py``: ``torch._C._acceleratorGraph.capture_begin`` (the pool and capture mode
  that ``torch.accelerator.Graph`` does not pass);
* ``testing/__init__.py``: ``PrivateUse1TestBase.bypass_device_restrictions`` (PyTorch's switch
  that runs ``@onlyCUDA`` tests on a PrivateUse1 backend);
* ``vdev/memory.py``: ``torch._utils._augment_memory_snapshot_stack_traces`` (a snapshot's stacks
  as frames, as ``torch.cuda.memory._snapshot``);
* ``distributed/__init__.py``: ``distributed_c10d._new_process_group_helper`` (wrapped: vccl as
  the default backend of groups made for vdev), ``BackendConfig``, ``Backend._plugins`` and
  ``ProcessGroup._set_default_backend``.

Besides Python objects, vdev relies on the text of the code Inductor generates; those contracts
are noted with the entry that produces them (``AsyncCompile.cpp_pybinding``,
``PythonWrapperCodegen.make_allocation``) and are exercised by the tests of tests/compile, as is
the ``TORCH_CHECK(..., "index out of bounds: ...")`` form that index_checks.py rewrites.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from torch_vdev._compat.releases import public_version

# The torch releases an entry was verified against unless it says otherwise, written out (not
# releases.SUPPORTED): a release added there fails tests/compile/test_torch_internals.py until
# the entries have been checked against it and it is added here.
TORCH_VERIFIED: tuple[str, ...] = ("2.13.0", "2.14.1", "2.15.0")

# What Inductor's C++ scheduling writes to define a kernel in the Python wrapper code it generates
# (see the entry of AsyncCompile.cpp_pybinding); inductor_backend.py rewrites it for vdev kernels.
CPU_KERNEL_DEFINITION = "async_compile.cpp_pybinding("


@dataclass(frozen=True)
class Internal:
    """One private torch API vdev relies on.

    ``target``: its dotted path (module, then attributes); ``use``: how vdev relies on it (call,
    read, subclass, patch, mutate, post-import hook, generated code); ``what``: what vdev does with
    it; ``why``: why nothing public does; ``where``: the files of this repository that use it
    (relative to its root); ``signature``: for a callable, its parameters as ``signature()``
    writes them (None where Python cannot inspect it: a builtin); ``members``: the attributes of
    the target vdev uses or overrides; ``verified``: the torch releases it was checked against.
    Where the signature differs between releases, ``signature`` is a table from each release
    (``releases.SUPPORTED``'s spelling) to its signature."""

    target: str
    use: str
    what: str
    why: str
    where: tuple[str, ...]
    signature: str | dict[str, str] | None = None
    members: tuple[str, ...] = ()
    verified: tuple[str, ...] = TORCH_VERIFIED

    def signature_in(self, torch_version: str) -> str | None:
        """The signature recorded for torch ``torch_version`` (None: not recorded; KeyError for a
        release the table does not list)."""
        if isinstance(self.signature, dict):
            return self.signature[public_version(torch_version)]
        return self.signature


_COMPILE_DIR = "python/torch_vdev/compile/"
_INIT = _COMPILE_DIR + "__init__.py"
_DEVICE = _COMPILE_DIR + "device_interface.py"
_FAKE = _COMPILE_DIR + "fake_layouts.py"
_RULES = _COMPILE_DIR + "inductor_device_rules.py"
_BACKEND = _COMPILE_DIR + "inductor_backend.py"
_KERNELS = _COMPILE_DIR + "kernels.py"
_POLICY = _COMPILE_DIR + "graph_policy.py"
_TREES = _COMPILE_DIR + "graph_trees.py"

_WHY_CPU_CODEGEN = (
    "Inductor asks whether a device type is 'cpu' to choose C++ code generation, with no "
    "registration for a device that generates CPU code; its GPU branch crashes on C++ kernels"
)
_WHY_TREES = "cudagraph trees are CUDA-only; vdev keeps their rules for its own graphs"

MANIFEST_ENTRIES: tuple[Internal, ...] = (
    # -- post-import hooks (torch_vdev/compile/__init__.py) --------------------------------------
    Internal(
        "torch._dynamo",
        "post-import hook",
        "once imported, vdev registers its device interface and in-graph classes",
        "importing Dynamo costs over a second, so `import torch` must not; Dynamo reads device "
        "interfaces when it traces",
        (_INIT,),
    ),
    Internal(
        "torch._inductor.output_code",
        "post-import hook",
        "once imported, vdev installs reduce-overhead's graph policy (graph_policy.install)",
        "it defines CompiledFxGraph, which the policy patches, and is imported before Inductor "
        "can compile a graph or load one from its cache",
        (_INIT,),
    ),
    Internal(
        "torch._inductor.compile_fx",
        "post-import hook",
        "once imported, vdev registers its Inductor backend (inductor_backend.register)",
        "every compilation imports it before lowering a graph, and no torch module imports it "
        "while Inductor initialises, so what the backend imports is whole by then; torch offers "
        "only torch.vdev attributes read by init_backend_registration, which tied torch.vdev to "
        "torch_vdev.compile",
        (_INIT,),
    ),
    # -- Dynamo's device interface (device_interface.py) -----------------------------------------
    Internal(
        "torch._dynamo.device_interface.DeviceInterface",
        "subclass",
        "VdevInterface: Dynamo's and Inductor's view of the device",
        "the interface Dynamo asks every device for (no public registration API)",
        (_DEVICE,),
        members=(
            "Worker",
            "device",
            "Event",
            "Stream",
            "current_device",
            "set_device",
            "device_count",
            "stream",
            "current_stream",
            "set_stream",
            "_set_stream_by_id",
            "synchronize",
            "get_device_properties",
            "get_raw_stream",
            "exchange_device",
            "maybe_exchange_device",
            "memory_allocated",
            "is_available",
            "is_bf16_supported",
            "get_compute_capability",
            "is_triton_capable",
            "raise_if_triton_unavailable",
        ),
    ),
    Internal(
        "torch._dynamo.device_interface.register_interface_for_device",
        "call",
        "registers VdevInterface for 'vdev' and each 'vdev:N'",
        "Dynamo's registry of device interfaces",
        (_DEVICE,),
        signature="(device, device_interface)",
    ),
    Internal(
        "torch._dynamo.device_interface.caching_worker_current_devices",
        "mutate",
        "VdevInterface.Worker records and reads the current device in compile workers",
        "Inductor's compile subprocesses must not use the device; the CUDA interface does the same",
        (_DEVICE,),
    ),
    Internal(
        "torch._dynamo.device_interface.caching_worker_device_properties",
        "mutate",
        "VdevInterface.Worker records the devices' properties before the workers start",
        "as caching_worker_current_devices",
        (_DEVICE,),
    ),
    Internal(
        "torch._dynamo.variables.user_defined.UserDefinedClassVariable._in_graph_classes",
        "mutate",
        "adds torch.vdev.Stream and Event to the set it returns (Dynamo's in-graph classes)",
        "Dynamo lists the stream and event classes it creates in the graph by name (torch.cuda's "
        "and torch.hpu's), with no registration for other devices",
        (_DEVICE,),
        signature="()",
    ),
    # -- fake tensors' layouts (fake_layouts.py) -------------------------------------------------
    Internal(
        "torch._subclasses.fake_impls.op_implementations_dict",
        "patch",
        "its entries for the four convolution operators are wrapped to give vdev tensors the "
        "memory format vdev's convolution gives (patch_item)",
        "fake convolution gives every PrivateUse1 device a contiguous output; there is no "
        "per-device hook for the rule",
        (_FAKE,),
    ),
    Internal(
        "torch._subclasses.fake_impls._normalize_function_or_error",
        "call",
        "names the input and weight of a fake convolution call",
        "the normalisation torch's own fake convolution uses",
        (_FAKE,),
        signature=(
            "(target, args, kwargs=None, arg_types=None, kwarg_types=None, "
            "normalize_to_only_use_kwargs=False)"
        ),
    ),
    Internal(
        "torch._prims_common.suggest_memory_format",
        "call",
        "a tensor's memory format, for vdev's convolution rule",
        "the rule ATen's convolution uses (no public equivalent)",
        (_FAKE,),
        signature="(x)",
    ),
    Internal(
        "torch.fx.experimental.symbolic_shapes.has_guarding_hint",
        "call",
        "leaves fake convolutions with unhinted sizes as torch made them",
        "the format cannot be chosen without a size hint",
        (_FAKE,),
        signature="(a)",
    ),
    # -- Inductor's CPU-codegen predicates (inductor_device_rules.py) ----------------------------
    Internal(
        "torch._inductor.utils.get_current_backend",
        "patch",
        "answers 'cpp' for vdev",
        _WHY_CPU_CODEGEN,
        (_RULES,),
        signature="(device_type=None)",
    ),
    Internal(
        "torch._inductor.codegen.common.get_current_backend",
        "patch",
        "the same function as codegen.common imported it",
        _WHY_CPU_CODEGEN,
        (_RULES,),
        signature="(device_type=None)",
    ),
    Internal(
        "torch._inductor.scheduler.get_current_backend",
        "patch",
        "the same function as the scheduler imported it",
        _WHY_CPU_CODEGEN,
        (_RULES,),
        signature="(device_type=None)",
    ),
    Internal(
        "torch._inductor.kernel.mm_common.get_current_backend",
        "patch",
        "the same function as mm_common imported it",
        _WHY_CPU_CODEGEN,
        (_RULES,),
        signature="(device_type=None)",
    ),
    Internal(
        "torch._inductor.scheduler.BaseSchedulerNode.is_cpu",
        "patch",
        "true for vdev nodes (loop reordering, pointwise-to-reduction reindexing)",
        _WHY_CPU_CODEGEN,
        (_RULES,),
        signature="(self)",
    ),
    Internal(
        "torch._inductor.ir.is_cpu",
        "patch",
        "true for vdev buffers (CPU's realisation heuristics)",
        _WHY_CPU_CODEGEN,
        (_RULES,),
        signature="(x)",
    ),
    Internal(
        "torch._inductor.ir.get_device_type",
        "call",
        "the device type of an IR node, for ir.is_cpu's replacement",
        "what the original ir.is_cpu asks",
        (_RULES,),
        signature="(x)",
    ),
    Internal(
        "torch._inductor.utils.device_need_guard",
        "patch",
        "true for vdev: generated code enters a device guard and defines its side streams",
        "decided for GPU device types only, with no registration",
        (_RULES,),
        signature="(device)",
    ),
    Internal(
        "torch._inductor.scheduler.device_need_guard",
        "patch",
        "the same function as the scheduler imported it",
        "as torch._inductor.utils.device_need_guard",
        (_RULES,),
        signature="(device)",
    ),
    Internal(
        "torch._inductor.virtualized.V",
        "read",
        "V.graph: the graph being lowered (its device, its FX module)",
        "Inductor's context of the current lowering",
        (_RULES, _POLICY, _BACKEND),
        members=("graph",),
    ),
    Internal(
        "torch._inductor.graph.GraphLowering",
        "read",
        "V.graph's get_current_device_or_throw() and module",
        "what the predicates and the policy's device check ask of the graph being lowered",
        (_RULES, _POLICY, _BACKEND),
        members=("get_current_device_or_throw", "module"),
    ),
    # -- Inductor's backend (inductor_backend.py) ------------------------------------------------
    Internal(
        "torch._inductor.config",
        "read",
        "cudagraph_policy (read and patched), cpp.threads (patched while vdev kernels are "
        "generated), triton.cudagraph_unexpected_rerecord_limit (read)",
        "Inductor's configuration has no per-device settings",
        (_BACKEND, _POLICY, _TREES),
        members=("patch", "cudagraph_policy", "cpp", "triton"),
    ),
    Internal(
        "torch._inductor.codegen.common.register_backend_for_device",
        "call",
        "registers VdevScheduling, the wrappers and CodegenIdentity for 'vdev'",
        "Inductor's registry of device backends (only reached otherwise through torch.vdev "
        "attributes)",
        (_BACKEND,),
        signature=(
            "(device, device_scheduling, device_wrapper_codegen, device_cpp_wrapper_codegen=None, "
            "device_fx_wrapper_codegen=None, device_custom_pass=None, device_custom_config=None)"
        ),
    ),
    Internal(
        "torch._inductor.codegen.common.register_device_op_overrides",
        "call",
        "registers VdevDeviceOpOverrides for 'vdev'",
        "the device calls Inductor writes into generated code",
        (_BACKEND,),
        signature="(device, device_op_overrides)",
    ),
    Internal(
        "torch._inductor.codegen.common.DeviceOpOverrides",
        "subclass",
        "VdevDeviceOpOverrides: the raw stream, set_device, synchronize, device guard and "
        "current stream that generated code calls",
        "the base Inductor expects",
        (_BACKEND,),
        members=(
            "import_get_raw_stream_as",
            "set_device",
            "synchronize",
            "device_guard",
            "current_stream",
        ),
    ),
    Internal(
        "torch._inductor.codegen.cpp.CppScheduling",
        "subclass",
        "VdevScheduling: CPU's C++ scheduling, kernels marked as vdev's, generated for the "
        "device's thread count, groups flushed before device-less nodes",
        "vdev kernels are Inductor's C++ kernels",
        (_BACKEND,),
        members=("scheduler", "codegen_node", "codegen_template", "flush"),
    ),
    Internal(
        "torch._inductor.codegen.cpp.CppScheduling.ready_to_flush",
        "subclass",
        "overridden: also true before a node without a device or on another stream",
        "on vdev a kernel group's call must precede the next stream operation",
        (_BACKEND,),
        signature="(self)",
    ),
    Internal(
        "torch._inductor.codegen.cpp.CppScheduling.define_kernel",
        "subclass",
        "overridden: marks each kernel's source as vdev's",
        "identical sources share one definition; a CPU kernel of the same source must stay CPU's",
        (_BACKEND,),
        signature="(self, src_code, nodes, kernel_args=None)",
    ),
    Internal(
        "torch._inductor.scheduler.Scheduler",
        "read",
        "nodes, current_node and node_to_stream, read by VdevScheduling.ready_to_flush",
        "the scheduler's order of nodes and their streams",
        (_BACKEND,),
        members=("nodes", "current_node", "node_to_stream"),
    ),
    Internal(
        "torch._inductor.scheduler.NopKernelSchedulerNode",
        "read",
        "skipped by ready_to_flush (nop nodes write no code)",
        "the scheduler's node classes",
        (_BACKEND,),
        members=("get_device",),
    ),
    Internal(
        "torch._inductor.codegen.wrapper.PythonWrapperCodegen",
        "subclass",
        "VdevWrapperCodegen: kernel definitions and calls of vdev kernels, buffer allocations "
        "on the tensors' device, the header that imports torch_vdev.compile.kernels",
        "the Python wrapper code Inductor generates",
        (_BACKEND,),
        members=("writeline", "wrap_kernel_call", "header", "write_header", "create"),
    ),
    Internal(
        "torch._inductor.codegen.wrapper.PythonWrapperCodegen.define_kernel",
        "subclass",
        "overridden: vdev kernels' definitions are rewritten (see AsyncCompile.cpp_pybinding)",
        "where Inductor writes a kernel's definition into the wrapper",
        (_BACKEND,),
        signature="(self, kernel_name, kernel_body, metadata=None, gpu=True, cpp_definition=None)",
    ),
    Internal(
        "torch._inductor.codegen.wrapper.PythonWrapperCodegen.make_allocation",
        "subclass",
        "overridden: the line it returns, with device='vdev', gets the device index",
        "Inductor writes device='vdev' for a device without an allocator function of its own",
        (_BACKEND,),
        signature=(
            "(self, name, device, dtype, shape, stride, allocation_shape=None, is_pinned=False)"
        ),
    ),
    Internal(
        "torch._inductor.codegen.wrapper.PythonWrapperCodegen._generate_kernel_call_helper",
        "subclass",
        "overridden: a vdev C++ kernel is called as CPU calls its kernels",
        "the GPU branch would pass a raw stream vdev's launcher does not take",
        (_BACKEND,),
        signature=(
            "(self, kernel_name, call_args, *, device=None, triton=True, arg_types=None, "
            "raw_keys=None, raw_args=None, triton_meta=None, inductor_meta=None, "
            "graph_name='', original_fxnode_name=None, current_stream_idx=None)"
        ),
    ),
    Internal(
        "torch._inductor.codegen.wrapper.SubgraphPythonWrapperCodegen",
        "subclass",
        "VdevSubgraphWrapperCodegen: the wrapper of control-flow subgraphs",
        "subgraphs have their own wrapper class",
        (_BACKEND,),
        signature="(subgraph_name, parent_wrapper, partition_signatures=None)",
    ),
    Internal(
        "torch._inductor.async_compile.AsyncCompile.cpp_pybinding",
        "generated code",
        "the wrapper's `async_compile.cpp_pybinding(argtypes, source)` definitions of vdev "
        "kernels are rewritten into `vdev_kernels.cpp_kernel(async_compile, name, argtypes, "
        "source)` (CPU_KERNEL_DEFINITION)",
        "on vdev a kernel is a stream launcher, not a CPU binding",
        (_BACKEND,),
        signature="(self, argtypes, source_code)",
    ),
    Internal(
        "torch._inductor.custom_graph_pass.CustomGraphModulePass",
        "subclass",
        "CodegenIdentity: names vdev's code generation in Inductor's cache keys (uuid)",
        "Inductor keys its caches with the uuid of each device's custom pass",
        (_BACKEND,),
        members=("__call__", "uuid"),
    ),
    Internal(
        "torch._inductor.runtime.benchmarking.register_benchmarker",
        "call",
        "registers benchmark_until_done, autotuning's timer for vdev",
        "the default timer times the host, which returns before vdev's work is done",
        (_BACKEND,),
        signature="(device_type, fn, *, override=False)",
    ),
    # -- compiling and loading the kernels (kernels.py) ------------------------------------------
    Internal(
        "torch._inductor.async_compile.AsyncCompile",
        "call",
        "cpp_kernel receives the wrapper's AsyncCompile and submits compilations to its pool",
        "Inductor's compile worker pool",
        (_KERNELS,),
        members=("submit",),
    ),
    Internal(
        "torch._inductor.async_compile.get_compile_threads",
        "call",
        "whether kernels compile in worker processes",
        "Inductor's setting",
        (_KERNELS,),
        signature="()",
    ),
    Internal(
        "torch._inductor.codecache.CppCodeCache",
        "subclass",
        "VdevKernelCodeCache: Inductor's C++ compilation and on-disk cache, with its own "
        "in-memory cache and CPU bindings' flags",
        "Inductor's compiler flags, vectorisation and OpenMP settings",
        (_KERNELS,),
        members=("cache", "cache_clear", "cpp_compile_command_flags", "_get_uncompiled_header"),
    ),
    Internal(
        "torch._inductor.codecache.CppCodeCache.load_async",
        "call",
        "compiles a vdev kernel's source with its trampoline",
        "Inductor's C++ compilation",
        (_KERNELS,),
        signature=(
            "(main_code, device_type='cpu', submit_fn=None, extra_flags=(), optimized_code=None, "
            "needs_vec_isa=None, kernel_needs_vec_isa=None)"
        ),
    ),
    Internal(
        "torch._inductor.codecache.CppPythonBindingsCodeCache._get_uncompiled_header",
        "call",
        "the header Inductor precompiles for CPU kernel bindings, used for vdev's kernels",
        "each kernel compiles about 3x faster with it",
        (_KERNELS,),
        signature="(device)",
    ),
    Internal(
        "torch._inductor.codecache.LambdaFuture",
        "call",
        "a kernel compiled in a worker, resolved by async_compile.wait",
        "what the wrapper's async_compile.wait resolves",
        (_KERNELS,),
        signature="(result_fn, future=None)",
    ),
    Internal(
        "torch._inductor.codecache.clear_on_fresh_cache",
        "call",
        "clears VdevKernelCodeCache with Inductor's caches",
        "Inductor's fresh_cache() must clear it too",
        (_KERNELS,),
        signature="(obj)",
    ),
    Internal(
        "torch._C._dynamo.guards._torchinductor_pyobject_tensor_data_ptr",
        "read",
        "the address of torch's tensor data-pointer accessor, called by _CompiledKernel",
        "the accessor Inductor's own C++ bindings use (no libtorch_python header)",
        ("bindings/compile.cpp",),
    ),
    # -- reduce-overhead's policy (graph_policy.py) ----------------------------------------------
    Internal(
        "torch._inductor.cudagraph_utils.CUDAGraphPolicy",
        "subclass",
        "VdevGraphPolicy: wraps each compiled function of a vdev graph in a GraphedFunction",
        "config.cudagraph_policy is reduce-overhead's extension point",
        (_POLICY,),
        members=("cudagraphify",),
    ),
    Internal(
        "torch._inductor.cudagraph_utils.CUDAGraphPolicy.cudagraphify",
        "subclass",
        "overridden by VdevGraphPolicy",
        "how Inductor hands a compiled function to the policy",
        (_POLICY,),
        signature=(
            "(self, model, example_inputs, static_input_idxs, *, device_index, is_backward, "
            "is_inference, **kwargs)"
        ),
    ),
    Internal(
        "torch._inductor.cudagraph_utils.check_multiple_devices_or_any_cpu_nodes",
        "patch",
        "a graph whose one device is vdev passes (under vdev's policy); Inductor's own check "
        "otherwise",
        "it disables graphs for any device but CUDA",
        (_POLICY,),
        signature="(device_node_mapping)",
    ),
    Internal(
        "torch._inductor.output_code.CompiledFxGraph.post_compile",
        "patch",
        "runs with config.cudagraph_policy = vdev's policy for graphs on vdev",
        "makes vdev's policy the policy of vdev graphs only",
        (_POLICY,),
        signature="(self, example_inputs, constants, graph_kwargs)",
    ),
    Internal(
        "torch._inductor.output_code.CompiledFxGraph",
        "read",
        "device_types, read by the patched post_compile",
        "which devices a compiled graph runs on",
        (_POLICY,),
        members=("device_types",),
    ),
    Internal(
        "torch._inductor.utils.get_first_incompatible_cudagraph_node",
        "call",
        "the operation that keeps a vdev graph from being one graph",
        "Inductor's rule for CUDA graphs without partitioning",
        (_POLICY,),
        signature="(gm)",
    ),
    # -- reduce-overhead's bookkeeping (graph_trees.py) ------------------------------------------
    Internal(
        "torch._inductor.cudagraph_utils.get_mutation_stack_trace",
        "call",
        "the skip reason of a function that mutates an input",
        "cudagraph trees' message",
        (_TREES,),
        signature="(placeholders, mutation_indices)",
    ),
    Internal(
        "torch._inductor.cudagraph_utils.log_cudagraph_skip_and_bump_counter",
        "call",
        "logs why a function runs without graphs and counts it",
        "tests and users read Inductor's counter",
        (_TREES,),
        signature="(msg)",
    ),
    Internal(
        "torch._inductor.cudagraph_utils.maybe_warning_due_to_dynamic_shape",
        "call",
        "warns when a function records graphs for many distinct sizes",
        "cudagraph trees' warning",
        (_TREES,),
        signature="(fn_cache, new_int_key)",
    ),
    Internal(
        "torch._dynamo.mutation_guard.GenerationTracker",
        "read",
        "generation: the count of top-level compiled calls, cudagraph trees' generation",
        _WHY_TREES,
        (_TREES,),
        members=("generation",),
    ),
    Internal(
        "torch._inductor.cudagraph_trees.MarkStepBox",
        "read",
        "mark_step_counter: torch.compiler.cudagraph_mark_step_begin()'s steps",
        _WHY_TREES,
        (_TREES,),
        members=("mark_step_counter",),
    ),
    Internal(
        "torch._inductor.compile_fx.static_input",
        "call",
        "a graph's input buffer, laid out as the input",
        "cudagraph trees' input buffers",
        (_TREES,),
        signature="(x)",
    ),
    Internal(
        "torch._inductor.compile_fx.index_expanded_dims_and_copy_",
        "call",
        "copies an input into its buffer (expanded dimensions once)",
        "cudagraph trees' input copy",
        (_TREES,),
        signature="(dst, src, expanded_dims)",
    ),
    Internal(
        "torch._inductor.output_code.get_expanded_dims",
        "call",
        "an input's expanded dimensions",
        "cudagraph trees' input copy",
        (_TREES,),
        signature="(t)",
    ),
    Internal(
        "torch.multiprocessing.reductions.StorageWeakRef",
        "call",
        "weak references to handed-out output storages (cdata, expired)",
        "cudagraph trees track outputs with it (undocumented)",
        (_TREES,),
        members=("cdata", "expired"),
    ),
    Internal(
        "torch.UntypedStorage._new_with_weak_ptr",
        "call",
        "a storage from a weak reference, to mark it overwritten",
        "cudagraph trees' way back to a live storage",
        (_TREES,),
    ),
    Internal(
        "torch._C._construct_storage_from_data_pointer",
        "call",
        "a non-owning storage over a graph's memory, one per replay",
        "cudagraph trees hand out outputs the same way",
        (_TREES,),
    ),
    Internal(
        "torch._C._stash_obj_in_tls",
        "call",
        "stashes a thread's graph state in torch's thread-local state",
        "autograd copies that state into its device threads, so a backward finds its forward's",
        (_TREES,),
    ),
    Internal(
        "torch._C._is_key_in_tls",
        "call",
        "whether this thread's graph state exists",
        "as _stash_obj_in_tls",
        (_TREES,),
    ),
    Internal(
        "torch._C._get_obj_in_tls",
        "call",
        "this thread's graph state",
        "as _stash_obj_in_tls",
        (_TREES,),
    ),
)

# Private torch uses outside torch.compile (see the module's docstring): not reached through this
# module, existence-checked by the same test.
_PG_HELPER = (
    "(group_size, group_rank, global_ranks_in_group, backend, store, group_name, "
    "backend_options=None, timeout=None, pg_tag=None, device_id=None, group_desc=None)"
)

ELSEWHERE: tuple[Internal, ...] = (
    Internal(
        "torch._register_device_module",
        "call",
        "installs torch.vdev",
        "torch's documented way to install a device module",
        ("python/torch_vdev/_registration.py",),
        signature="(device_type, module)",
    ),
    Internal(
        "torch.nn.parameter.UninitializedTensorMixin",
        "mutate",
        "_allowed_methods gets Tensor.vdev",
        "LazyLinear(2).vdev() raised where .cuda() works",
        ("python/torch_vdev/_registration.py",),
        members=("_allowed_methods",),
    ),
    Internal(
        "torch.autograd._supported_activities",
        "patch",
        "wrapped: ProfilerActivity.PrivateUse1 is left out while no vdev device is available",
        "torch lists PrivateUse1 whenever the backend is renamed, so a default profile() "
        "synchronized an unavailable vdev at exit and lost its trace (CUDA: listed with a GPU)",
        ("python/torch_vdev/_registration.py",),
        signature="()",
    ),
    Internal(
        "torch._utils._rebuild_tensor",
        "call",
        "rebuilds a vdev tensor received from another process",
        "what torch's own reductions call",
        ("python/torch_vdev/vdev/_sharing.py",),
        signature="(storage, storage_offset, size, stride)",
    ),
    Internal(
        "torch.multiprocessing.reductions.storage_from_cache",
        "call",
        "a storage already received from another process",
        "torch's per-process cache of shared storages",
        ("python/torch_vdev/vdev/_sharing.py",),
        signature="(cls, key)",
    ),
    Internal(
        "torch.multiprocessing.reductions.shared_cache",
        "mutate",
        "receives vdev storages",
        "as storage_from_cache",
        ("python/torch_vdev/vdev/_sharing.py",),
    ),
    Internal(
        "torch.multiprocessing.reductions.fd_id",
        "call",
        "the cache key of a received file descriptor",
        "as storage_from_cache",
        ("python/torch_vdev/vdev/_sharing.py",),
        signature="(fd)",
    ),
    Internal(
        "torch._tensor_str.tensor_totype",
        "patch",
        "wrapped: a vdev tensor on a device without float64 is formatted in float32",
        "torch's printing converts to float64 on the device except on the devices it names (MPS)",
        ("python/torch_vdev/vdev/_capability.py",),
        signature="(t)",
    ),
    Internal(
        "torch.testing._internal.common_device_type.PrivateUse1TestBase",
        "mutate",
        "sets bypass_device_restrictions (the plugin's --vdev-bypass-device-restrictions)",
        "PyTorch's own switch for a PrivateUse1 backend to run @onlyCUDA tests; no public form",
        ("python/torch_vdev/testing/__init__.py",),
        members=("bypass_device_restrictions",),
    ),
    Internal(
        "torch._utils._augment_memory_snapshot_stack_traces",
        "call",
        "turns a snapshot's recorded stacks into frames (torch.vdev.memory._snapshot)",
        "torch.cuda.memory._snapshot does the same for CUDA; no public form takes another device",
        ("python/torch_vdev/vdev/memory.py",),
        signature="(snapshot)",
    ),
    Internal(
        "torch._C._acceleratorGraph.capture_begin",
        "call",
        "begins a capture with a pool and a capture mode",
        "torch.accelerator.Graph.capture_begin passes neither",
        ("python/torch_vdev/vdev/graphs.py",),
    ),
    Internal(
        "torch.distributed.distributed_c10d._new_process_group_helper",
        "patch",
        "wrapped: groups made for vdev with no backend named get vccl as their default",
        "the default backend type of such a group is chosen with NCCL hard-coded",
        ("python/torch_vdev/distributed/__init__.py",),
        # 2.14 added enable_reconfigure (the wrapper passes every argument through).
        signature={
            "2.13.0": _PG_HELPER,
            "2.14.1": _PG_HELPER[:-1] + ", enable_reconfigure=False)",
            "2.15.0": _PG_HELPER[:-1] + ", enable_reconfigure=False)",
        },
    ),
    Internal(
        "torch.distributed.distributed_c10d.BackendConfig",
        "call",
        "the device map of a group's backend",
        "what _new_process_group_helper decides with",
        ("python/torch_vdev/distributed/__init__.py",),
        members=("get_device_backend_map",),
    ),
    Internal(
        "torch.distributed.distributed_c10d.Backend",
        "read",
        "_plugins: whether vccl is registered",
        "register_backend raises on a second registration",
        ("python/torch_vdev/distributed/__init__.py",),
        members=("_plugins", "register_backend"),
    ),
    Internal(
        "torch.distributed.distributed_c10d.ProcessGroup",
        "call",
        "_set_default_backend(CUSTOM) for vccl groups",
        "as torch sets NCCL for CUDA groups",
        ("python/torch_vdev/distributed/__init__.py",),
        members=("_set_default_backend",),
    ),
)

MANIFEST: dict[str, Internal] = {entry.target: entry for entry in MANIFEST_ENTRIES}

_originals: dict[str, Any] = {}  # target -> what it was before vdev patched it


def _entry(target: str, use: str | None = None) -> Internal:
    entry = MANIFEST.get(target)
    if entry is None:
        raise KeyError(
            f"torch_vdev: {target} is not in torch_internals.MANIFEST (every private torch API "
            "torch.compile support reaches has an entry there)"
        )
    if use is not None and entry.use != use:
        raise KeyError(f"torch_vdev: {target} is listed for {entry.use!r}, not {use!r}")
    return entry


def resolve(target: str) -> Any:
    """The object at a dotted path: each package's submodules are imported as they are reached
    (as ``from package import submodule`` would), everything else is an attribute."""
    parts = target.split(".")
    obj: Any = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=1):
        if hasattr(obj, part):
            obj = getattr(obj, part)
        elif isinstance(obj, ModuleType) and hasattr(obj, "__path__"):
            obj = importlib.import_module(".".join(parts[: i + 1]))
        else:
            raise AttributeError(f"{'.'.join(parts[:i])} has no attribute {part!r} ({target})")
    return obj


def get(target: str) -> Any:
    """The object at ``target``, a manifest entry; imported now if it has not been."""
    _entry(target)
    return resolve(target)


def patch(target: str, replacement: Any) -> Any:
    """Sets the attribute at ``target`` (an entry whose use is "patch") to ``replacement`` and
    returns what it was. The caller patches once."""
    _entry(target, "patch")
    owner_path, name = target.rsplit(".", 1)
    owner = resolve(owner_path)
    original = getattr(owner, name)
    _originals.setdefault(target, original)
    setattr(owner, name, replacement)
    return original


def patch_item(target: str, key: Any, replacement: Any) -> Any:
    """Sets ``key`` of the mapping at ``target`` (an entry whose use is "patch") to
    ``replacement`` and returns what it was."""
    _entry(target, "patch")
    table = resolve(target)
    original = table[key]
    _originals.setdefault(f"{target}[{key}]", original)
    table[key] = replacement
    return original


def original(target: str) -> Any:
    """What ``target`` was before vdev patched it (the object itself if it was not patched)."""
    _entry(target)
    return _originals[target] if target in _originals else resolve(target)


def hooked_module(target: str) -> str:
    """The name of a module whose import runs a vdev action (an entry for a post-import hook)."""
    return _entry(target, "post-import hook").target


def signature(obj: Any) -> str | None:
    """A callable's parameters as the manifest records them: names, kinds and defaults, without
    annotations (which change with typing clean-ups, not with behaviour). None where Python cannot
    inspect the callable (a builtin of torch._C)."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    params = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()]
    return str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))
