"""Sparse layouts on vdev against CPU, on PyTorch's own operator database (OpInfo op_db): every
OpInfo that declares a sparse layout (supports_sparse for COO, supports_sparse_csr, _csc, _bsr,
_bsc), in each layout it declares, and the OpInfos whose own samples are sparse (sparse.*: CSR),
in float32, float64 and the first complex and the first integer dtype the OpInfo declares for CUDA
(`op.supported_dtypes("cuda")`) that CPU also has.

The samples are made on the CPU from a fixed seed and copied to vdev with `.to(device)` (every
tensor of the input, args and kwargs; a `device="cpu"` argument becomes the vdev device), on
vdev:0, the current device, and in float64 on vdev:1, which is not (kernels must take their device
from their tensors):
- OpInfos with a sample function of their own for the layout (mul, sum, zeros_like, randn_like,
  masked.*): `op.sample_inputs_sparse_<layout>`, the samples PyTorch validates as supported;
- the others (the unary ufuncs, to_sparse), and the like-functions in COO (whose own COO samples
  PyTorch marks failing): their dense samples converted as PyTorch's test_sparse_csr.py
  (test_consistency) converts them: dense_dim = ndim - 2 for compressed layouts, BSR/BSC blocks of
  the dimensions' smallest divisors; COO also uncoalesced (every entry twice) and hybrid (one dense
  dimension); each layout also with about half its elements (blocks) zero, compressed ones also
  with int32 indices. Samples `validate_sample_input_sparse` marks as failing are kept: CPU raises
  for them, and vdev must raise the same;
- sparse.* (sparse.sampled_addmm, sparse.mm reduce): `op.sample_inputs_func`, CSR inputs already;
- the sparse error inputs (`op.error_inputs_sparse`: mul, sum and the like-functions), on vdev:0.

Each sample's copy must be the sample (structure as below, values exactly). Then the operator runs
on both devices, and its in-place variant (on a clone: it returns it) and out= form (into
empty_like tensors of its result: it returns them) where the OpInfo has them, as PyTorch's
test_sparse_csr.py checks them. When CPU returns, vdev must return at the call, its next
synchronize must not raise, and each result tensor must be on the sample's device with CPU's
structure (layout, dtype, sizes, number of specified elements, sparse and dense dimensions,
whether a COO tensor is coalesced, index dtype, block size) and CPU's values:
torch.testing.assert_close at the dtype's default tolerances (exact for integers and bool; NaNs
equal), on the indices and values where they determine the values (compressed layouts, coalesced
COO), else on to_dense. A random operator's values (randn_like: vdev draws from its own
generator) are not compared. When CPU raises, vdev must raise an exception of the same type.

CI runs the first 3 samples of each operator, layout and dtype (of the converted ones: the first 3
dense samples, each converted in every way), and 6 error inputs per operator and layout (about
30 s on two cores). VDEV_CONFORMANCE_FULL=1 runs every sample and error input, in every dtype the
OpInfo declares for CUDA that CPU has (about 3 minutes). Each failing (dtype, layout, operator) is
listed with its reason in layout_opinfo_expected_failures.txt; its test is reported xfailed, and
fails when it passes (remove it from the list), unless the reason starts "full sweep:" and the run
is CI's.

Quantized tensors: op_db has no OpInfo with a quantized dtype or quantized samples (its only
"quant" names are quantile and nanquantile), so no quantized case comes from it here.
"""

import itertools
import os
import warnings
from functools import partial
from pathlib import Path

import pytest
import torch

# The random-operator detector of the OpInfo sweep, shared (as tests/random/ does).
from opinfo_sweep import SeededOperators, first_line, op_name
from sweeps import listed
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo.core import ErrorInput, SampleInput
from torch.testing._internal.opinfo.definitions.sparse import validate_sample_input_sparse
from torch.utils._pytree import tree_flatten, tree_map

import torch_vdev  # noqa: F401 (registers vdev)

HERE = Path(__file__).resolve().parent
LIST = HERE / "layout_opinfo_expected_failures.txt"
FULL = os.environ.get("VDEV_CONFORMANCE_FULL") == "1"
MAX_SAMPLES = None if FULL else 3

LAYOUTS = {
    "sparse_coo": (torch.sparse_coo, "supports_sparse"),
    "sparse_csr": (torch.sparse_csr, "supports_sparse_csr"),
    "sparse_csc": (torch.sparse_csc, "supports_sparse_csc"),
    "sparse_bsr": (torch.sparse_bsr, "supports_sparse_bsr"),
    "sparse_bsc": (torch.sparse_bsc, "supports_sparse_bsc"),
}
COMPRESSED = {torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc}
BLOCKED = {torch.sparse_bsr, torch.sparse_bsc}
FLOATING = [torch.float32, torch.float64]
COMPLEX = [torch.complex64, torch.complex128]
INTEGER = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]


def dtypes(op) -> list[torch.dtype]:
    both = op.supported_dtypes("cuda") & op.supported_dtypes("cpu")
    if FULL:
        return sorted(both, key=str)
    out = [d for d in FLOATING if d in both]
    out += [d for d in COMPLEX if d in both][:1]
    out += [d for d in INTEGER if d in both][:1]
    return out


def own_sample_function(op, layout_name) -> bool:
    fn = getattr(op, f"sample_inputs_{layout_name}_func")
    return getattr(fn, "__name__", None) != "_sample_inputs_unspecified"


def layouts(op) -> list[str]:
    if op.name.startswith("sparse."):
        return ["sparse_csr"]  # sample_inputs_sparse_sampled_addmm, _mm_reduce: CSR inputs
    return [name for name, (_, flag) in LAYOUTS.items() if getattr(op, flag)]


SPARSE_OPS = {op_name(op): op for op in op_db if layouts(op)}
CASES = [
    pytest.param(name, layout, dtype, id=f"{name}-{layout}-{str(dtype)[6:]}")
    for name, op in SPARSE_OPS.items()
    for layout in layouts(op)
    for dtype in dtypes(op)
]


def has_error_inputs(op, layout: str) -> bool:
    if op.error_inputs_sparse_func is None:
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return next(iter(op.error_inputs_sparse("cpu", LAYOUTS[layout][0])), None) is not None


ERROR_CASES = [
    pytest.param(name, layout, id=f"{name}-{layout}")
    for name, op in SPARSE_OPS.items()
    for layout in layouts(op)
    if has_error_inputs(op, layout)
]


def expected_failures(dtype: str) -> dict[tuple[str, str], str]:
    """Lines `DTYPE LAYOUT OPERATOR  # reason` ({(LAYOUT, OPERATOR): reason}), DTYPE and LAYOUT
    `*` for every one. The error inputs are listed under DTYPE `errors` (never under `*`)."""

    def entries(dt):
        return {tuple(fields): reason for fields, reason in listed(LIST, dt)}

    out = entries(dtype)
    if dtype == "errors":
        out = {k: r for k, r in out.items() if k not in entries("no dtype: only `*` lines")}
    for fields in out:
        assert len(fields) == 2, f"{LIST.name}: DTYPE LAYOUT OPERATOR, got {fields}"
        assert fields[0] == "*" or fields[0] in LAYOUTS, f"{LIST.name}: layout {fields[0]}"
    return out


def reason_listed(dtype: str, layout: str, name: str) -> str | None:
    listed_here = expected_failures(dtype)
    return listed_here.get((layout, name), listed_here.get(("*", name)))


# --- samples ------------------------------------------------------------------------------------


def smallest_divisor(n: int) -> int:
    return next((i for i in range(2, int(n**0.5) + 1) if n % i == 0), n)


def sparser(x: torch.Tensor, blocksize) -> torch.Tensor:
    """x with about half its elements zero (half its blocks, for a block size), from the seed."""
    rows, cols = x.shape[:2]
    br, bc = blocksize or (1, 1)
    keep = torch.rand(rows // br, cols // bc) < 0.5
    keep = keep.repeat_interleave(br, 0).repeat_interleave(bc, 1)
    return x * keep.reshape(rows, cols, *([1] * (x.ndim - 2))).to(x.dtype)


def uncoalesced(s: torch.Tensor) -> torch.Tensor:
    """The COO tensor s with every entry specified twice, at half its value where it can be."""
    halves = (s.dtype.is_floating_point or s.dtype.is_complex) and s.dtype is not torch.complex32
    values = s.values() / 2 if halves else s.values()  # (CPU's div has no complex32 kernel)
    return torch.sparse_coo_tensor(
        s.indices().repeat(1, 2), values.repeat(2, *([1] * (values.ndim - 1))), s.shape
    )


def int32_indices(s: torch.Tensor) -> torch.Tensor:
    """The compressed tensor s with int32 indices (to_sparse makes int64 ones)."""
    row_major = s.layout in (torch.sparse_csr, torch.sparse_bsr)
    compressed = s.crow_indices() if row_major else s.ccol_indices()
    plain = s.col_indices() if row_major else s.row_indices()
    return torch.sparse_compressed_tensor(
        compressed.int(), plain.int(), s.values(), s.shape, layout=s.layout
    )


def converted(x: torch.Tensor, layout) -> list[torch.Tensor]:
    """The sparse versions of the dense tensor x that the conversion of dense samples tests."""
    if layout is torch.sparse_coo:
        if x.ndim == 0:
            return []
        out = [x.to_sparse()]
        if x.numel() > 0:
            out.append(uncoalesced(x.to_sparse()))
        if x.ndim >= 2:
            out.append(x.to_sparse(x.ndim - 1))  # hybrid: one dense dimension
        if x.ndim == 2:
            out.append(sparser(x, None).to_sparse())
        return out
    if x.ndim < 2:
        return []
    dense_dim = x.ndim - 2
    blocksize = tuple(map(smallest_divisor, x.shape[:2])) if layout in BLOCKED else None
    kw = dict(layout=layout, blocksize=blocksize, dense_dim=dense_dim)
    out = [x.to_sparse(**kw)]
    if x.ndim == 2 and x.numel() > 0:
        out.append(sparser(x, blocksize).to_sparse(**kw))
        out.append(int32_indices(out[-1]))
    return out


def dense_samples(op, dtype):
    """op.sample_inputs("cpu", dtype), without its wrapper: it walks the interpreter's stack in
    search of a unittest test (inspect.stack: half this test's time, under pytest)."""
    return op.sample_inputs_func(op, "cpu", dtype, False)


def converted_samples(op, layout, dtype):
    """The dense samples of op (the first MAX_SAMPLES that convert), their input converted to the
    layout in each way `converted` has; PyTorch's own validation says which are expected to fail
    (kept: CPU must raise, vdev must raise the same)."""
    dense = (s for s in dense_samples(op, dtype) if isinstance(s.input, torch.Tensor))
    taken = 0
    for sample in dense:
        variants = converted(sample.input, layout)
        if not variants:
            continue
        for x in variants:
            s = SampleInput(x, args=sample.args, kwargs=sample.kwargs)
            checked = validate_sample_input_sparse(op, s)
            yield checked.sample_input if isinstance(checked, ErrorInput) else checked
        taken += 1
        if taken == MAX_SAMPLES:
            return


def samples(op, layout_name: str, dtype) -> list[SampleInput]:
    layout = LAYOUTS[layout_name][0]
    if op.name.startswith("sparse."):
        made = dense_samples(op, dtype)
    elif own_sample_function(op, layout_name):
        made = getattr(op, f"sample_inputs_{layout_name}")("cpu", dtype)
    else:
        return list(converted_samples(op, layout, dtype))
    made = list(itertools.islice(made, MAX_SAMPLES))
    # The like-functions' own COO samples are all marked failing (randn_like's normal_ has no
    # sparse kernel), zeros_like's too: their dense samples, converted, are checked instead.
    return made or list(converted_samples(op, layout, dtype))


def device_for(dtype) -> str:
    """vdev:0, the current device, except for float64: vdev:1, which is not (its kernels must
    take their device from their tensors)."""
    return "vdev:1" if dtype is torch.float64 else "vdev:0"


def on_vdev(s: SampleInput, device: str) -> SampleInput:
    def to(x):
        return x.to(device) if isinstance(x, torch.Tensor) else x

    kwargs = tree_map(to, s.kwargs)
    if "device" in kwargs and torch.device(kwargs["device"]).type == "cpu":
        kwargs["device"] = device  # a factory-like op's own device argument
    return SampleInput(to(s.input), args=tree_map(to, s.args), kwargs=kwargs)


def describe(s: SampleInput) -> str:
    def one(x):
        if not isinstance(x, torch.Tensor):
            return repr(x)
        what = f"{str(x.layout)[6:]} {str(x.dtype)[6:]} {list(x.shape)}"
        if x.layout is torch.sparse_coo:
            what += f" sparse_dim={x.sparse_dim()} coalesced={x.is_coalesced()}"
        elif x.layout in COMPRESSED:
            what += f" dense_dim={x.dense_dim()}"
            if x.layout in BLOCKED:
                what += f" blocksize={tuple(x.values().shape[1:3])}"
        return what

    parts = [one(s.input), *map(one, s.args), *(f"{k}={one(v)}" for k, v in s.kwargs.items())]
    return ", ".join(parts)


# --- comparison ---------------------------------------------------------------------------------


def structure(x: torch.Tensor) -> dict:
    what = {"layout": x.layout, "dtype": x.dtype, "shape": tuple(x.shape)}
    if x.layout != torch.strided:
        what["nnz"] = x._nnz()
    if x.layout is torch.sparse_coo:
        what |= {
            "sparse_dim": x.sparse_dim(),
            "dense_dim": x.dense_dim(),
            "coalesced": x.is_coalesced(),
            "index dtype": x._indices().dtype,
        }
    elif x.layout in COMPRESSED:
        compressed = (
            x.crow_indices()
            if x.layout in (torch.sparse_csr, torch.sparse_bsr)
            else (x.ccol_indices())
        )
        what |= {"dense_dim": x.dense_dim(), "index dtype": compressed.dtype}
        if x.layout in BLOCKED:
            what["blocksize"] = tuple(x.values().shape[compressed.ndim : compressed.ndim + 2])
    return what


def dense(x: torch.Tensor) -> torch.Tensor:
    """The CPU tensor x as a strided one."""
    if x.dtype is torch.complex32:
        x = x.to(torch.complex64)  # CPU's to_dense has no complex32 kernel (cpublas_axpy)
    if x.layout is torch.sparse_coo and x.sparse_dim() > 0:
        # to_dense, summing repeated entries, as CPU's to_dense (which takes 10 ms for 400
        # elements: 3/4 of this test's time) does
        v = x._values().int() if x.dtype is torch.bool else x._values()
        d = torch.zeros(x.shape, dtype=v.dtype).index_put_(tuple(x._indices()), v, accumulate=True)
        x = d.bool() if x.dtype is torch.bool else d
    x = x.to_dense() if x.layout != torch.strided else x
    return x.resolve_conj().resolve_neg()


def members(x: torch.Tensor) -> list[torch.Tensor]:
    """What the values of the CPU tensor x are made of: its indices and values when its layout
    has one representation per value (compressed ones, and COO when coalesced), else x dense."""
    if x.layout in COMPRESSED:
        row_major = x.layout in (torch.sparse_csr, torch.sparse_bsr)
        if row_major:
            return [x.crow_indices(), x.col_indices(), dense(x.values())]
        return [x.ccol_indices(), x.row_indices(), dense(x.values())]
    if x.layout is torch.sparse_coo and x.is_coalesced():
        return [x._indices(), dense(x._values())]
    return [dense(x)]


def assert_same_values(got: torch.Tensor, want: torch.Tensor, **tolerances) -> None:
    """torch.testing.assert_close on the CPU tensors' values (of the same structure), dense:
    on the indices and values where they determine them (to_dense of a tensor of a million
    elements takes CPU 20 ms), else on to_dense."""
    for g, w in zip(members(got), members(want), strict=True):
        torch.testing.assert_close(g, w, equal_nan=True, **tolerances)


def compare(got, want, device: str, random: bool, where="result") -> None:
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), f"{where}: vdev gave {type(got).__name__}"
        assert got.device == torch.device(device), f"{where}: on {got.device}, not on {device}"
        g = got.cpu()
        assert structure(g) == structure(want), f"{where}: {structure(g)}, CPU {structure(want)}"
        if not random:
            try:
                assert_same_values(g, want)
            except AssertionError as e:
                raise AssertionError(f"{where}: {e}") from None
    elif isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), f"{where}: {got!r}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            compare(g, w, device, random, f"{where}[{i}]")
    else:
        assert got == want, f"{where}: vdev {got!r}, CPU {want!r}"


def is_random(op, s: SampleInput) -> bool:
    mode = SeededOperators()
    with mode:
        op(s.input, *s.args, **s.kwargs)
    return mode.seen


def in_place(op):
    def f(x, *args, **kwargs):
        x = x.clone()
        result = op.inplace_variant(x, *args, **kwargs)
        assert result is x, "the in-place variant returns another tensor than its input"
        return result

    return f


def with_out(op):
    def f(x, *args, **kwargs):
        out = tree_map(torch.empty_like, op(x, *args, **kwargs))
        result = op(x, *args, **kwargs, out=out)
        assert tensors(result) == tensors(out), "out= returns other tensors than its out tensors"
        return out

    return f


def variants(op) -> dict:
    """The ways of calling op that the checks compare (PyTorch's test_sparse_csr.py checks the
    in-place and out= forms of the sparse unary operators too)."""
    out = {"": op}
    if op.inplace_variant is not None:
        out["in-place: "] = in_place(op)
    if op.supports_out:
        out["out=: "] = with_out(op)
    return out


def copy_differs(s: SampleInput, device: str) -> str | None:
    """None when the sample's copy on the device is the sample, else what differs."""
    for i, (x, y) in enumerate(zip(tensors(s), tensors(on_vdev(s, device)), strict=True)):
        if (structure(y.cpu()), y.device) != (structure(x), torch.device(device)):
            return f"copies tensor {i} of the sample as {structure(y)}, on {y.device}"
        try:
            assert_same_values(y.cpu(), x, rtol=0, atol=0)
        except AssertionError as e:
            return f"copies tensor {i} of the sample: {str(e).splitlines()[0]}"
    return None


def run_on_both(op, s: SampleInput, device: str) -> str | None:
    """None when vdev does what CPU does with the sample, else what differs."""
    d = on_vdev(s, device)  # before CPU runs: the copy is of the sample as made
    try:
        want, cpu_error = op(s.input, *s.args, **s.kwargs), None
    except Exception as e:  # noqa: BLE001
        want, cpu_error = None, e
    try:
        got, vdev_error = op(d.input, *d.args, **d.kwargs), None
    except Exception as e:  # noqa: BLE001
        got, vdev_error = None, e
    try:
        torch.vdev.synchronize()
    except Exception as e:  # noqa: BLE001
        return f"raises at the next synchronize: {first_line(e)}"
    if cpu_error is not None:
        if vdev_error is None:
            return f"returns, where CPU raises {first_line(cpu_error)}"
        if type(vdev_error) is not type(cpu_error):
            return f"raises {first_line(vdev_error)}, where CPU raises {first_line(cpu_error)}"
        return None
    if vdev_error is not None:
        return f"raises {first_line(vdev_error)}, where CPU returns"
    try:
        try:
            compare(got, want, device, random=False)
        except AssertionError:
            if not is_random(op, s):  # values drawn on vdev's own generator differ
                raise
            compare(got, want, device, random=True)
        torch.vdev.synchronize()
    except AssertionError as e:
        return "; ".join(line.strip() for line in str(e).splitlines() if line.strip())[:500]
    except Exception as e:  # noqa: BLE001 (a result that cannot be copied to the CPU, ...)
        return first_line(e)
    return None


def tensors(tree) -> list[torch.Tensor]:
    if isinstance(tree, SampleInput):
        tree = (tree.input, tree.args, tree.kwargs)
    return [x for x in tree_flatten(tree)[0] if isinstance(x, torch.Tensor)]


def settle(key: tuple[str, str, str], checked: int, failures: list[str]) -> None:
    """Passes, fails, or xfails the case `key` = (dtype, layout, operator) as the list says."""
    dtype, layout, name = key
    reason = reason_listed(dtype, layout, name)
    if failures:
        if reason is not None:
            pytest.xfail(reason)
        pytest.fail(
            f"{len(failures)} of {checked} calls differ from CPU (not listed in {LIST.name}):\n"
            + "\n".join(failures[:5])
        )
    if reason is not None and (FULL or not reason.startswith("full sweep:")):
        pytest.fail(f"now passes: remove `{dtype} {layout} {name}` from {LIST.name}")


# --- the tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "layout", "dtype"), CASES)
def test_sparse_samples_match_cpu(name, layout, dtype):
    op = SPARSE_OPS[name]
    torch.manual_seed(0)
    failures, checked = [], 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sparse "beta" warnings and the like
        try:
            made = samples(op, layout, dtype)
        except Exception as e:  # noqa: BLE001 (unittest.SkipTest: "NO SAMPLES!", ...)
            pytest.skip(f"no {layout} samples in {dtype} on the CPU: {first_line(e)}")
        if not made:
            pytest.skip(f"no {layout} samples")
        wrong = {str(s.input.layout) for s in made} - {str(LAYOUTS[layout][0])}
        assert not wrong, f"samples of layout {wrong} in the {layout} case"
        for s in made:
            calls = [("the copy of ", copy_differs)]
            calls += [(how, partial(run_on_both, fn)) for how, fn in variants(op).items()]
            for how, check in calls:
                failure = check(s, device_for(dtype))
                checked += 1
                if failure is not None:
                    failures.append(f"  {how}{describe(s)}: vdev {failure}")
                    break
    settle((str(dtype)[6:], layout, name), checked, failures)


@pytest.mark.parametrize(("name", "layout"), ERROR_CASES)
def test_sparse_error_inputs_raise_as_on_cpu(name, layout):
    op = SPARSE_OPS[name]
    torch.manual_seed(0)
    failures, checked = [], 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        errors = list(op.error_inputs_sparse("cpu", LAYOUTS[layout][0]))
        for e in itertools.islice(errors, MAX_SAMPLES and 2 * MAX_SAMPLES):
            failure = copy_differs(e.sample_input, "vdev:0") or run_on_both(
                op, e.sample_input, "vdev:0"
            )
            checked += 1
            if failure is not None:
                failures.append(f"  {describe(e.sample_input)}: vdev {failure}")
    settle(("errors", layout, name), checked, failures)


def test_every_sparse_opinfo_is_checked():
    """Every OpInfo that declares a sparse layout or is a sparse.* operator has a case here, in
    every layout it declares."""
    declared = {
        (op_name(op), layout)
        for op in op_db
        for layout, (_, flag) in LAYOUTS.items()
        if getattr(op, flag)
    }
    covered = {(p.values[0], p.values[1]) for p in CASES}
    assert declared <= covered, sorted(declared - covered)
    assert any(name.startswith("sparse.") for name, _ in covered)
