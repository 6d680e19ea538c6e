"""Autocast on vdev behaves as CUDA's: every operator of PyTorch's CUDA autocast lists
(torch.testing._internal.autocast_test_lists) runs in the dtype CUDA's policy gives it and matches
the same operator run by hand in that dtype; binary_cross_entropy is banned inside autocast; the
default dtype is float16 and every floating dtype is accepted, as CUDA accepts it; nested and
disabled regions restore the outer state; a non-floating dtype warns and disables autocast; the
weight cast cache casts a leaf weight once per region; autocast inside activation checkpointing
recomputes in the same dtypes; and autocast never synchronizes."""

import warnings
from collections import Counter

import pytest
import torch
from asyncutil import gated, run_bounded, sid, wait_until_blocked
from torch.testing._internal.autocast_test_lists import AutocastTestLists, TestAutocast
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import checkpoint

from torch_vdev import _testing as rt

# How PyTorch's test/test_cuda.py runs each list (test_autocast_<list>): the dtype the operator
# must run as, and the keyword arguments it passes to TestAutocast._run_autocast_outofplace.
# torch_fp16 and nn_fp16 run twice, as test_autocast_torch_bf16 / test_autocast_nn_bf16 do too.
FP16 = {"amp_dtype": torch.float16}
BF16 = {"amp_dtype": torch.bfloat16}
RUNS = {
    "torch_fp16": [(torch.float16, FP16), (torch.bfloat16, BF16)],
    "nn_fp16": [
        (torch.float16, {**FP16, "module": torch._C._nn}),
        (torch.bfloat16, {**BF16, "module": torch._C._nn}),
    ],
    "linalg_fp16": [(torch.float16, {**FP16, "module": torch._C._linalg})],
    "methods_fp16": [(torch.float16, {**FP16, "module": None})],
    "torch_fp32": [(torch.float32, FP16)],
    "nn_fp32": [(torch.float32, {**FP16, "module": torch._C._nn})],
    "methods_fp32": [(torch.float32, {**FP16, "module": None})],
    "torch_need_autocast_promote": [(torch.float32, FP16)],
    "torch_expect_builtin_promote": [(torch.float32, FP16)],
    "methods_expect_builtin_promote": [(torch.float32, {**FP16, "module": None})],
}


def unpack(list_name, entry):
    """(op, args, extra helper kwargs, skip reason) of one list entry, read as test_cuda.py reads
    that list."""
    op, args = entry[0], entry[1]
    if list_name == "torch_fp16":
        # The optional third element is a skip flag (TEST_WITH_ROCM for the cuDNN operators). The
        # einsum entry is (op, equation, args): its third element is a non-empty tuple, so
        # PyTorch's test skips it too.
        if len(entry) == 3 and entry[2]:
            return op, args, {}, "skipped by PyTorch's test (truthy third element)"
        if op.startswith("cudnn_"):
            # test_cuda.py runs these only under TEST_CUDNN; cuDNN operators do not exist on vdev.
            return op, args, {}, "cuDNN operator: PyTorch runs it only with cuDNN"
        return op, args, {}, None
    if list_name == "torch_fp32" and len(entry) == 3:
        return op, args, {"add_kwargs": entry[2]}, None
    if list_name.endswith("expect_builtin_promote"):
        return op, args, {"out_type": entry[2]}, None
    return op, args, {}, None


# The lists' names, read at collection from a CPU instance (same entries in the same order as the
# vdev instance the tests use), so that collecting this file neither touches vdev nor moves the
# global CPU generator.
with torch.random.fork_rng(devices=[]):
    NAMES = AutocastTestLists("cpu")


def _cases():
    """One pytest param per (list, entry, run dtype), named by operator."""
    params = []
    for list_name, runs in RUNS.items():
        entries = getattr(NAMES, list_name)
        seen = Counter()
        for i, entry in enumerate(entries):
            op, _, _, skip = unpack(list_name, entry)
            total = sum(e[0] == op for e in entries)
            tag = op if total == 1 else f"{op}-{seen[op]}"
            seen[op] += 1
            for run_as, _ in runs:
                marks = [pytest.mark.skip(reason=skip)] if skip else []
                params.append(
                    pytest.param(
                        list_name,
                        i,
                        run_as,
                        marks=marks,
                        id=f"{list_name}-{str(run_as).removeprefix('torch.')}-{tag}",
                    )
                )
    return params


@pytest.fixture(scope="module")
def lists():
    torch.manual_seed(0)
    return AutocastTestLists("vdev")


@pytest.fixture(scope="module")
def helper():
    return TestAutocast()


@pytest.mark.parametrize(("list_name", "index", "run_as"), _cases())
def test_operator_runs_as_cuda_autocast_runs_it(lists, helper, list_name, index, run_as):
    op, args, extra, _ = unpack(list_name, getattr(lists, list_name)[index])
    assert op == unpack(list_name, getattr(NAMES, list_name)[index])[0]
    opts = dict(next(o for t, o in RUNS[list_name] if t == run_as))
    helper._run_autocast_outofplace(op, args, run_as, device="vdev", **opts, **extra)
    torch.vdev.synchronize()  # a queued failure belongs to this operator, not the next test


@pytest.mark.parametrize("index", range(len(NAMES.banned)), ids=[e[0] for e in NAMES.banned])
def test_banned_operator_raises_inside_autocast_only(lists, index):
    op, args, module = lists.banned[index]
    with torch.autocast("vdev"):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            getattr(module, op)(*args)
    out = getattr(module, op)(*args)  # outside autocast it is an ordinary operator
    torch.vdev.synchronize()
    assert out.dtype == torch.float32


def test_default_dtype_is_float16():
    assert torch.get_autocast_dtype("vdev") == torch.float16
    a, b = torch.randn(4, 4, device="vdev"), torch.randn(4, 4, device="vdev")
    with torch.autocast("vdev"):
        assert torch.is_autocast_enabled("vdev")
        assert torch.mm(a, b).dtype == torch.float16
    assert not torch.is_autocast_enabled("vdev")


def test_bfloat16_is_supported():
    assert torch.vdev.is_bf16_supported()
    assert torch.bfloat16 in torch.vdev.get_amp_supported_dtype()
    a, b = torch.randn(4, 4, device="vdev"), torch.randn(4, 4, device="vdev")
    with torch.autocast("vdev", dtype=torch.bfloat16):
        out = torch.mm(a, b)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu(), torch.mm(a.bfloat16(), b.bfloat16()).cpu())


def test_nested_and_disabled_regions_restore_the_outer_state():
    a, b = torch.randn(4, 4, device="vdev"), torch.randn(4, 4, device="vdev")
    with torch.autocast("vdev"):
        with torch.autocast("vdev", dtype=torch.bfloat16):
            assert torch.get_autocast_dtype("vdev") == torch.bfloat16
            assert torch.mm(a, b).dtype == torch.bfloat16
        assert torch.get_autocast_dtype("vdev") == torch.float16
        assert torch.mm(a, b).dtype == torch.float16
        with torch.autocast("vdev", enabled=False):
            assert not torch.is_autocast_enabled("vdev")
            assert torch.mm(a, b).dtype == torch.float32
        assert torch.is_autocast_enabled("vdev")
        assert torch.mm(a, b).dtype == torch.float16
    assert not torch.is_autocast_enabled("vdev")
    assert torch.get_autocast_dtype("vdev") == torch.float16
    assert torch.mm(a, b).dtype == torch.float32


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_every_floating_dtype_is_accepted_as_cudas_autocast_accepts_it(dtype):
    # torch.autocast("cuda") checks no dtype; float32 is a common way to switch lower precision
    # off without removing the region. Before: "not supported ... Disabling autocast".
    a = torch.randn(4, 4, device="vdev", dtype=torch.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        region = torch.autocast("vdev", dtype=dtype)
    with region:
        assert torch.is_autocast_enabled("vdev")
        assert torch.get_autocast_dtype("vdev") == dtype
        assert torch.mm(a, a).dtype == dtype  # mm is on the lower-precision list


def test_a_non_floating_dtype_warns_and_disables_autocast():
    # CUDA would take even this; vdev refuses a dtype no floating operator can be cast to.
    a, b = torch.randn(4, 4, device="vdev"), torch.randn(4, 4, device="vdev")
    with pytest.warns(UserWarning, match="not supported") as record:
        region = torch.autocast("vdev", dtype=torch.int32)
    text = "\n".join(str(w.message) for w in record)
    assert "torch.float16" in text and "torch.bfloat16" in text
    with region:
        assert not torch.is_autocast_enabled("vdev")
        assert torch.mm(a, b).dtype == torch.float32
    assert torch.get_autocast_dtype("vdev") == torch.float16


class CastsOf(TorchDispatchMode):
    """Counts aten::_to_copy calls whose input is `tensor`. Autocast sits above the Python
    dispatch key, so its casts reach this mode."""

    def __init__(self, tensor):
        super().__init__()
        self.tensor = tensor
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._to_copy.default and args[0] is self.tensor:
            self.count += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize(("cache_enabled", "casts"), [(True, 1), (False, 2)])
def test_a_leaf_weight_is_cast_once_per_region_when_the_cache_is_enabled(cache_enabled, casts):
    w = torch.randn(4, 4, device="vdev", requires_grad=True)
    x = torch.randn(4, 4, device="vdev")
    kwargs = {} if cache_enabled else {"cache_enabled": False}
    with torch.autocast("vdev", **kwargs), CastsOf(w) as counter:
        outs = [torch.mm(w, x), torch.mm(w, x)]
    assert counter.count == casts
    assert all(o.dtype == torch.float16 for o in outs)
    assert torch.equal(outs[0].cpu(), outs[1].cpu())


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_recomputes_under_the_same_autocast(use_reentrant):
    torch.manual_seed(0)
    w1 = torch.randn(8, 8, device="vdev", requires_grad=True)
    w2 = torch.randn(8, 8, device="vdev", requires_grad=True)
    x0 = torch.randn(8, 8, device="vdev")
    weights = torch.arange(8.0, device="vdev")

    def block(x):
        h = torch.relu(torch.mm(x, w1))  # float16
        return torch.softmax(torch.mm(h, w2), dim=1)  # float32

    def run(checkpointed):
        x = x0.clone().requires_grad_()
        with torch.autocast("vdev"):
            out = checkpoint(block, x, use_reentrant=use_reentrant) if checkpointed else block(x)
        (out * weights).sum().backward()
        grads = [x.grad, w1.grad, w2.grad]
        w1.grad = w2.grad = None
        return out, grads

    ref_out, ref_grads = run(checkpointed=False)
    out, grads = run(checkpointed=True)
    assert out.dtype == ref_out.dtype == torch.float32
    assert torch.equal(out.cpu(), ref_out.cpu())
    for g, r in zip(grads, ref_grads, strict=True):
        assert g.dtype == torch.float32
        assert torch.equal(g.cpu(), r.cpu())


def test_autocast_is_queued_never_synchronized():
    a, b = torch.randn(16, 16, device="vdev"), torch.randn(16, 16, device="vdev")
    stream = torch.vdev.current_stream()
    out = {}

    def body():  # autocast state is per thread: the region is entered on the calling thread
        with torch.autocast("vdev"):
            out["mm"] = torch.mm(a, b)
            out["softmax"] = torch.softmax(out["mm"], dim=1)

    with gated(stream) as gate:
        wait_until_blocked(gate)
        assert run_bounded(body), "autocast waited for the stream: it synchronized"
        assert not rt.stream_query(*sid(stream))  # its casts and operators are behind the gate
    torch.vdev.synchronize()
    assert out["mm"].dtype == torch.float16 and out["softmax"].dtype == torch.float32
    mm = torch.mm(a.cpu().half(), b.cpu().half())
    torch.testing.assert_close(out["mm"].cpu(), mm)
    torch.testing.assert_close(out["softmax"].cpu(), torch.softmax(mm.float(), dim=1))
