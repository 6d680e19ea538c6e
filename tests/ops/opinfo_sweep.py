"""Runs PyTorch's operator database (OpInfo op_db) on vdev and on CPU and compares them.

    python tests/ops/opinfo_sweep.py DTYPE MAX_SAMPLES [LAYOUT] [--checks C,C,...] [--reference]
    python tests/ops/opinfo_sweep.py errors             -> every operator's error_inputs

One JSON line per (operator, check): {"op", "dtype", "check", "status", "msg"}. Operators run in
every dtype their OpInfo declares for CUDA (`dtypesIfCUDA`) that CPU also has (vdev computes with
CPU's kernels; a dtype CUDA has and CPU lacks has no reference: status "noref").

Checks (default: forward):
  forward   results equal CPU's (torch.testing.assert_close at the dtype's default tolerances);
  strides   every output tensor has CPU's strides (dimensions of size 1 ignored);
  backward  gradients of every differentiable input, for seeded output gradients, equal CPU's, in
            the dtypes the OpInfo declares differentiable on CUDA;
  fwad      forward-mode AD: the outputs' tangents for seeded input tangents equal CPU's;
  out       the out= contract, each case run on both devices and compared (CPU is the reference
            for the contract CUDA shares): an out tensor of the right shape gets the values and is
            returned; an empty one is resized silently; one of the wrong shape is resized with
            CPU's warning; one of a dtype the result cannot be cast to is refused with CPU's error;
            a CPU out tensor for vdev inputs is refused. vdev must raise and warn during the call,
            never at the next synchronize.
  variants  the method and in-place variants (x.add(y), x.add_(y)) give CPU's results, and the
            in-place one writes its input and returns it;
  errors    (DTYPE "errors") every ErrorInput of the OpInfo raises at the call (before any
            synchronize), with its declared type and message (PyTorch's test_errors contract) and
            with CPU's type.

LAYOUT (default "default": the samples as OpInfo makes them) changes the layout of every tensor
of every sample, on both devices alike: "channels_last" (4-d and 5-d tensors in channels-last
memory format) or "noncontiguous" (OpInfo's own noncontiguous copies). Kernels pick their paths
by layout, so these sweeps find operators whose results vdev computes into the wrong layout.
--reference uses the OpInfo's reference inputs (the samples plus its extra edge cases).

Samples are generated on vdev (the sample functions know which arguments must stay on the CPU)
and the CPU reference runs on CPU copies of the same samples. Random operators (their CPU run
calls an operator tagged nondeterministic_seeded) are compared by shapes and dtypes only, since
vdev draws from its own generators (same seed, same values on vdev, and the distributions are
tested in tests/random/).
Status: "pass", "fail" (message kept), "noref" (the CPU reference does not run for any sample),
"skip" (nothing to check: output is uninitialised memory, no differentiable output, ...).
Run by tests/ops/test_opinfo.py in a subprocess, so that a crash is reported, not fatal.
"""

import argparse
import json
import re
import warnings

import torch
import torch.autograd.forward_ad as fwAD
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

CHECKS = ("forward", "strides", "backward", "fwad", "out", "variants")

UNINITIALISED_OUTPUT = {
    "empty",
    "empty_like",
    "empty_permuted",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
}


# out= written in Python with copy_, which crosses devices on CUDA too: a CPU out tensor for device
# inputs is accepted there as well.
OUT_COPIED_IN_PYTHON = {"lu"}  # torch/functional.py: out[i].resize_as_(...).copy_(...)


class Skip(Exception):
    """Nothing to compare for this sample (no differentiable output, no tensor result, ...)."""


def op_name(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def to_cpu(x):
    return x.cpu() if isinstance(x, torch.Tensor) else x


def sample_to_cpu(x):
    """A sample's tensor on the CPU, with its whole storage when it is a plain view of part of
    it: as_strided reads the storage beyond the view."""
    if not isinstance(x, torch.Tensor):
        return x
    plain = x.layout == torch.strided and not (x.is_conj() or x.is_neg() or x.requires_grad)
    if not plain or x.untyped_storage().nbytes() == x.numel() * x.element_size():
        return x.cpu()
    storage = x.untyped_storage().cpu()
    return torch.empty(0, dtype=x.dtype).set_(storage, x.storage_offset(), x.size(), x.stride())


def to_vdev(x):
    return x.to("vdev") if isinstance(x, torch.Tensor) else x


def metadata(x):
    return (tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else x


def tensors(tree) -> list[torch.Tensor]:
    return [x for x in tree_flatten(tree)[0] if isinstance(x, torch.Tensor)]


def first_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]


def same_text(msg: str) -> str:
    """A message with device names and addresses taken out: the same check says "cpu" on one
    device and "vdev:0" on the other."""
    msg = re.sub(r"\b(vdev|cpu|privateuseone)(:\d+)?\b", "DEV", msg)
    return re.sub(r"0x[0-9a-f]+", "ADDR", msg)


def synchronize_quietly():
    try:
        torch.vdev.synchronize()
    except RuntimeError:
        pass


class SeededOperators(TorchDispatchMode):
    """Records whether any operator that draws random numbers runs."""

    NOT_RANDOM = {"aten::_fused_sdp_choice"}  # tagged, but only chooses a kernel

    def __init__(self):
        super().__init__()
        self.seen = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if torch.Tag.nondeterministic_seeded in func.tags:
            self.seen |= func._schema.name not in self.NOT_RANDOM
        return func(*args, **(kwargs or {}))


def channels_last(x):
    if not isinstance(x, torch.Tensor) or x.layout != torch.strided:
        return x
    if x.dim() == 4:
        return x.contiguous(memory_format=torch.channels_last)
    if x.dim() == 5:
        return x.contiguous(memory_format=torch.channels_last_3d)
    return x


LAYOUTS = {
    "default": lambda s: s,
    "channels_last": lambda s: s.transform(channels_last),
    "noncontiguous": lambda s: s.noncontiguous(),
}


def is_random(op, c) -> bool:
    mode = SeededOperators()
    with mode:
        op(c.input, *c.args, **c.kwargs)
    return mode.seen


def call(op, s, **extra):
    torch.manual_seed(0)
    return op(s.input, *s.args, **s.kwargs, **extra)


class Sweep:
    """One operator in one dtype: its samples on both devices, and the checks over them."""

    def __init__(self, op, dtype, max_samples, layout, reference):
        self.op, self.dtype, self.max_samples = op, dtype, max_samples
        self.layout, self.reference = layout, reference
        self.random = None  # decided by the first sample whose values differ

    def samples(self, requires_grad=False):
        """Pairs (vdev sample, CPU sample) of the same values, in the sweep's layout."""
        make = self.op.reference_inputs if self.reference else self.op.sample_inputs
        try:
            torch.manual_seed(0)
            samples = list(make("vdev", self.dtype, requires_grad=requires_grad))
            on_device = True
        except Exception:  # noqa: BLE001 (a sample function that cannot make device inputs)
            torch.manual_seed(0)
            try:
                samples = list(make("cpu", self.dtype, requires_grad=requires_grad))
            except Exception:  # noqa: BLE001 (nor CPU ones: an integer tensor requiring grad)
                return
            on_device = False
        for s in samples[: self.max_samples]:
            try:
                if requires_grad:
                    # Leaves of the same values on both devices: grads are taken with respect
                    # to exactly these tensors. Arguments the sample keeps on the CPU stay there.
                    def leaf(device):
                        def f(x):
                            if not isinstance(x, torch.Tensor):
                                return x
                            y = x.detach()
                            if device == "cpu":
                                y = sample_to_cpu(y)
                            elif not on_device:
                                y = y.to(device)
                            return y.requires_grad_(x.requires_grad)

                        return f

                    c, d = s.transform(leaf("cpu")), s.transform(leaf("vdev"))
                else:
                    c = s.transform(sample_to_cpu) if on_device else s
                    d = s if on_device else s.transform(to_vdev)
                if on_device and isinstance(c.kwargs.get("device"), (str, torch.device)):
                    c.kwargs = {**c.kwargs, "device": "cpu"}  # a factory's own device argument
                # Each device's sample takes the layout itself (.cpu() keeps not every layout).
                yield LAYOUTS[self.layout](d), LAYOUTS[self.layout](c)
            except Exception:  # noqa: BLE001 (a sample whose tensors cannot take the layout)
                continue

    def run(self, check) -> tuple[str, str]:
        ran = compared = 0
        fn = getattr(self, "check_" + check)
        for d, c in self.samples(requires_grad=check == "backward"):
            try:
                ref = call(self.op, c)
            except Exception:  # noqa: BLE001 (the reference does not run for this sample)
                continue
            if ref is NotImplemented:
                continue  # a reflected operator declining the operand types (__rsub__)
            ran += 1
            try:
                fn(d, c, ref)
                compared += 1
            except Skip:
                continue
            except Exception as e:  # noqa: BLE001
                synchronize_quietly()
                return "fail", first_line(e)
        if not ran:
            return "noref", ""
        return ("pass", "") if compared else ("skip", "nothing to compare")

    def values_differ_by_chance(self, c) -> bool:
        if self.random is None:
            self.random = is_random(self.op, c)
        return self.random

    def compare(self, got, ref, c, what="results"):
        try:
            torch.testing.assert_close(
                got, ref, equal_nan=True, check_device=False, check_stride=False
            )
        except AssertionError as e:
            if not self.values_differ_by_chance(c):
                raise AssertionError(f"{what}: {e}") from None
            assert tree_map(metadata, got) == tree_map(metadata, ref), f"{what}: metadata differs"

    def check_forward(self, d, c, ref):
        got = tree_map(to_cpu, call(self.op, d))
        torch.vdev.synchronize()
        self.compare(got, ref, c)

    def check_strides(self, d, c, ref):
        got = tensors(call(self.op, d))
        refs = tensors(ref)
        if not refs:
            raise Skip
        for i, (g, r) in enumerate(zip(got, refs, strict=True)):
            if g.layout != torch.strided or r.layout != torch.strided or r.numel() == 0:
                continue  # (no element: strides say nothing)
            gs = [st for sz, st in zip(g.shape, g.stride(), strict=True) if sz > 1]
            rs = [st for sz, st in zip(r.shape, r.stride(), strict=True) if sz > 1]
            assert gs == rs, (
                f"output {i} of shape {list(r.shape)}: vdev strides {g.stride()}, "
                f"CPU strides {r.stride()}"
            )
        torch.vdev.synchronize()

    def check_backward(self, d, c, ref):
        if self.values_differ_by_chance(c):
            raise Skip  # a random operator's gradient depends on its draws (its mask, ...)
        grads = []
        for s in (c, d):
            try:
                out = s.output_process_fn_grad(call(self.op, s))
            except Exception:  # noqa: BLE001
                if s is c:
                    raise Skip from None  # CPU's own forward does not run with grads
                raise
            outs = [o for o in tensors(out) if o.requires_grad]
            inputs = [x for x in tensors((s.input, s.args, s.kwargs)) if x.requires_grad]
            if not outs or not inputs:
                raise Skip
            g = torch.Generator().manual_seed(1)
            seeds = [torch.randn(o.shape, dtype=o.dtype, generator=g).to(o.device) for o in outs]
            try:
                got = torch.autograd.grad(outs, inputs, seeds, allow_unused=True)
            except Exception:  # noqa: BLE001
                if s is c:
                    raise Skip from None  # CPU's own backward does not run for this sample
                raise
            grads.append(tree_map(to_cpu, list(got)))
        torch.vdev.synchronize()
        self.compare(grads[1], grads[0], c, "gradients")

    def check_fwad(self, d, c, ref):
        if self.values_differ_by_chance(c):
            raise Skip
        tangents = []
        for s in (c, d):
            g = torch.Generator().manual_seed(1)

            def dual(x, g=g):
                if not isinstance(x, torch.Tensor) or not (x.is_floating_point() or x.is_complex()):
                    return x
                t = torch.randn(x.shape, dtype=x.dtype, generator=g).to(x.device)
                return fwAD.make_dual(x, t)

            with fwAD.dual_level():
                try:
                    out = call(self.op, s.transform(dual))
                    # (unpack_dual of a sparse result raises, on CPU too: to_sparse of integers)
                    tangent = [to_cpu(fwAD.unpack_dual(o).tangent) for o in tensors(out)]
                except Exception:  # noqa: BLE001
                    if s is c:
                        raise Skip from None  # CPU's own forward AD does not run
                    raise
                tangents.append(tangent)
        torch.vdev.synchronize()
        self.compare(tangents[1], tangents[0], c, "tangents")

    def check_variants(self, d, c, ref):
        variants = {
            "method": self.op.method_variant,
            "in-place": self.op.inplace_variant,
        }
        compared = False
        for name, fn in variants.items():
            if fn is None or not isinstance(c.input, torch.Tensor):
                continue
            results = []
            for s in (c, d):
                x = s.input.clone() if name == "in-place" else s.input
                try:
                    torch.manual_seed(0)
                    r = fn(x, *s.args, **s.kwargs)
                except Exception:  # noqa: BLE001
                    if s is c:
                        break  # CPU refuses this variant here (an in-place dtype change, ...)
                    raise
                if name == "in-place":
                    assert r is x, f"the {name} variant returned another tensor"
                results.append(tree_map(to_cpu, r))
            else:
                torch.vdev.synchronize()
                self.compare(results[1], results[0], c, f"the {name} variant")
                compared = True
        if not compared:
            raise Skip

    def check_out(self, d, c, ref):
        refs = tensors(ref)
        if not refs or len(refs) != len(tree_flatten(ref)[0]):
            raise Skip  # an out= needs tensor results
        cases = {
            "an out tensor of the right shape": lambda r, dev: torch.empty_like(r, device=dev),
            "an empty out tensor": lambda r, dev: torch.empty(0, dtype=r.dtype, device=dev),
        }
        if all(r.numel() > 0 for r in refs):
            cases["an out tensor of the wrong shape"] = lambda r, dev: torch.empty(
                r.numel() + 1, dtype=r.dtype, device=dev
            )
        if all(r.is_floating_point() or r.is_complex() for r in refs):
            cases["an int64 out tensor for a floating result"] = lambda r, dev: torch.empty_like(
                r, dtype=torch.int64, device=dev
            )
        for case, make in cases.items():
            want = self.out_outcome(c, ref, make, "cpu")
            got = self.out_outcome(d, ref, make, "vdev")
            if want[0] == "values" and got[0] == "values":
                self.compare(got[3], want[3], c, f"with {case}, the out tensor")
                want, got = want[:3], got[:3]
            assert got == want, f"with {case}: vdev {got}, CPU {want}"
        on_vdev = any(x.device.type == "vdev" for x in tensors((d.input, d.args, d.kwargs)))
        if on_vdev and self.op.name not in OUT_COPIED_IN_PYTHON:
            outcome = self.out_outcome(d, ref, lambda r, dev: torch.empty_like(r), "cpu")
            assert outcome[0] == "raises", f"a CPU out tensor for vdev inputs: {outcome}"

    def out_outcome(self, s, ref, make, device):
        """What calling with out= does: ("raises", type, message) at the call, or ("values",
        warnings, returned-the-out-tensor, values)."""
        out = tree_map(lambda r: make(r, device), ref)
        with warnings.catch_warnings(record=True) as during:
            warnings.simplefilter("always")
            try:
                result = call(self.op, s, out=out)
            except Exception as e:  # noqa: BLE001
                synchronize_quietly()
                return ("raises", type(e).__name__, same_text(str(e).splitlines()[0]))
        with warnings.catch_warnings(record=True) as late:
            warnings.simplefilter("always")
            try:
                torch.vdev.synchronize()
            except RuntimeError as e:
                return ("raises at synchronize", type(e).__name__, first_line(e))
        if late:
            return ("warns at synchronize", str(late[0].message))
        # The out= contract's own warning. Others are not compared: a TORCH_WARN_ONCE (a
        # deprecation) is spent by whichever device runs first.
        said = sorted(
            {
                same_text(str(w.message).splitlines()[0])
                for w in during
                if "resized" in str(w.message)
            }
        )
        returned = [id(x) for x in tensors(result)] == [id(x) for x in tensors(out)]
        return ("values", said, returned, tree_map(to_cpu, out))


def raised_at_the_call(op, si) -> BaseException | None:
    """What calling with this sample raises before any synchronize (None: nothing)."""
    try:
        op(si.input, *si.args, **si.kwargs)
    except Exception as e:  # noqa: BLE001
        synchronize_quietly()
        return e
    return None


def check_errors(op) -> tuple[str, str]:
    """Every ErrorInput that CPU refuses raises on vdev at the call, with the OpInfo's declared
    type and message (PyTorch's test_errors contract, shared by CPU and CUDA) or else exactly
    CPU's. An ErrorInput CPU accepts is not an error of this build (some are marked expected
    failures in PyTorch's own test_ops), so it is not counted."""
    try:
        on_vdev = list(op.error_inputs("vdev"))
    except Exception as e:  # noqa: BLE001
        return "fail", "error_inputs('vdev'): " + first_line(e)
    on_cpu = list(op.error_inputs("cpu"))
    checked = 0
    for i, ei in enumerate(on_vdev):
        # Its CPU twin: the same declared error (some error inputs exist for one device only:
        # error_inputs_func branches on the device).
        twins = [
            ec
            for ec in on_cpu
            if (ec.error_type, ec.error_regex) == (ei.error_type, ei.error_regex)
        ]
        if not twins:
            continue
        ec = twins[0]
        on_cpu.remove(ec)
        cpu_error = raised_at_the_call(op, ec.sample_input)
        if cpu_error is None:
            continue
        checked += 1
        what = f"error input {i} (expects {ei.error_type.__name__} {ei.error_regex!r})"
        e = raised_at_the_call(op, ei.sample_input)
        if e is None:
            try:
                torch.vdev.synchronize()
            except Exception as late:  # noqa: BLE001
                return "fail", f"{what}: raised at the next synchronize, not at the call: " + (
                    first_line(late)
                )
            return "fail", f"{what}: did not raise (CPU: {first_line(cpu_error)})"
        declared = isinstance(e, ei.error_type) and re.search(ei.error_regex, str(e))
        like_cpu = type(e) is type(cpu_error) and same_text(str(e)) == same_text(str(cpu_error))
        if not (declared or like_cpu):
            return "fail", f"{what}: raised {first_line(e)} (CPU: {first_line(cpu_error)})"
    if not checked:
        return "skip", "no error input that CPU refuses"
    return "pass", f"{checked} error inputs"


def main() -> None:
    warnings.simplefilter("ignore")
    p = argparse.ArgumentParser()
    p.add_argument("dtype")
    p.add_argument("max_samples", type=int, nargs="?", default=1_000_000)
    p.add_argument("layout", nargs="?", default="default", choices=list(LAYOUTS))
    p.add_argument("--checks", default="forward")
    p.add_argument("--reference", action="store_true")
    a = p.parse_args()
    if a.dtype == "errors":
        for op in op_db:
            # An operator CUDA has no dtype for is refused whatever its arguments.
            if op.error_inputs_func is not None and op.supported_dtypes("cuda"):
                status, msg = check_errors(op)
                row = {"op": op_name(op), "dtype": "*", "check": "errors"}
                print(json.dumps({**row, "status": status, "msg": msg}), flush=True)
        return
    dtype = getattr(torch, a.dtype)
    checks = a.checks.split(",")
    assert set(checks) <= set(CHECKS), f"checks are {CHECKS}, not {checks}"
    for op in op_db:
        # vdev runs what CUDA runs (with CPU's kernels): a dtype CUDA lacks is refused, as CUDA
        # refuses it (tests/fidelity/test_missing_cuda_kernels.py).
        if dtype not in op.supported_dtypes("cuda"):
            continue
        sweep = Sweep(op, dtype, a.max_samples, a.layout, a.reference)
        for check in checks:
            row = {"op": op_name(op), "dtype": a.dtype, "check": check}
            if dtype not in op.supported_dtypes("cpu"):
                status, msg = "noref", "CPU has no kernel for this dtype"
            elif op.name in UNINITIALISED_OUTPUT:
                status, msg = "skip", "output is uninitialised memory"
            elif check == "backward" and not (
                op.supports_autograd
                and dtype in op.supported_backward_dtypes("cuda")
                and dtype in op.supported_backward_dtypes("cpu")
            ):
                status, msg = "skip", "not differentiable in this dtype"
            elif check == "fwad" and not (
                op.supports_forward_ad and dtype in op.supported_backward_dtypes("cuda")
            ):
                status, msg = "skip", "no forward-mode AD in this dtype"
            elif check == "out" and not op.supports_out:
                status, msg = "skip", "no out= variant"
            else:
                status, msg = sweep.run(check)
            print(json.dumps({**row, "status": status, "msg": msg}), flush=True)


if __name__ == "__main__":
    main()
