"""Runs PyTorch's operator database (OpInfo op_db) on vdev and on CPU and compares the results.

    python tests/ops/opinfo_sweep.py DTYPE MAX_SAMPLES [LAYOUT]  -> one JSON line per operator

LAYOUT (default "default": the samples as OpInfo makes them) changes the layout of every tensor
of every sample, on both devices alike: "channels_last" (4-d and 5-d tensors in channels-last
memory format) or "noncontiguous" (OpInfo's own noncontiguous copies). Kernels pick their paths
by layout (CPU's out= kernels restride their outputs to the input's memory format), so these
sweeps find operators whose results vdev computes into the wrong layout.

Samples are generated on vdev (the sample functions know which arguments must stay on the CPU),
the CPU reference runs on CPU copies of the same samples, and results are compared with
torch.testing.assert_close at the dtype's default tolerances. A sample whose results differ is
checked for randomness: if its CPU run calls an operator tagged nondeterministic_seeded, only the
results' shapes and dtypes are compared, since vdev draws from its own generators (the
distributions are tested in tests/random/). OpInfo's random operators reseed and restore every
generator themselves, so generator states cannot tell.
Status: "pass", "fail" (message kept), "noref" (the CPU reference itself does not run for any
sample), "skip" (output is uninitialised memory by definition).
Run by tests/ops/test_opinfo.py in a subprocess, so that a crash is reported, not fatal.
"""

import json
import sys
import warnings

import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

UNINITIALISED_OUTPUT = {
    "empty",
    "empty_like",
    "empty_permuted",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
}


def op_name(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def to_cpu(x):
    return x.cpu() if isinstance(x, torch.Tensor) else x


def to_vdev(x):
    return x.to("vdev") if isinstance(x, torch.Tensor) else x


def metadata(x):
    return (tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else x


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


def check(op, dtype, max_samples, layout="default"):
    try:
        torch.manual_seed(0)
        samples = list(op.sample_inputs("vdev", dtype, requires_grad=False))[:max_samples]
        on_device = True
    except Exception:  # noqa: BLE001 (a sample function that cannot make device inputs)
        samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:max_samples]
        on_device = False
    ran = 0
    for s in samples:
        try:
            c = s.transform(to_cpu) if on_device else s
            # Each device's sample takes the layout itself (.cpu() does not keep every layout).
            c = LAYOUTS[layout](c)
            s = LAYOUTS[layout](s)
        except Exception:  # noqa: BLE001 (a sample whose tensors cannot take the layout)
            continue
        try:
            torch.manual_seed(0)
            ref = op(c.input, *c.args, **c.kwargs)
        except Exception:  # noqa: BLE001 (the reference does not run for this sample)
            continue
        ran += 1
        try:
            d = s if on_device else s.transform(to_vdev)
            torch.manual_seed(0)
            got = tree_map(to_cpu, op(d.input, *d.args, **d.kwargs))
            torch.vdev.synchronize()
            try:
                torch.testing.assert_close(
                    got, ref, equal_nan=True, check_device=False, check_stride=False
                )
            except AssertionError:
                if not is_random(op, c):
                    raise
                assert tree_map(metadata, got) == tree_map(metadata, ref), "metadata differs"
        except Exception as e:  # noqa: BLE001
            try:
                torch.vdev.synchronize()
            except RuntimeError:
                pass
            first = str(e).splitlines()[0] if str(e) else ""
            return "fail", f"{type(e).__name__}: {first}"[:300]
    return ("pass", "") if ran else ("noref", "")


def main() -> None:
    warnings.simplefilter("ignore")
    dtype = getattr(torch, sys.argv[1])
    max_samples = int(sys.argv[2])
    layout = sys.argv[3] if len(sys.argv) > 3 else "default"
    for op in op_db:
        # vdev runs what CUDA runs (with CPU's kernels): a dtype CUDA lacks is refused, as CUDA
        # refuses it (tests/fidelity/test_missing_cuda_kernels.py).
        if dtype not in op.supported_dtypes("cpu") or dtype not in op.supported_dtypes("cuda"):
            continue
        name = op_name(op)
        if op.name in UNINITIALISED_OUTPUT:
            status, msg = "skip", "output is uninitialised memory"
        else:
            status, msg = check(op, dtype, max_samples, layout)
        print(json.dumps({"op": name, "status": status, "msg": msg}), flush=True)


if __name__ == "__main__":
    main()
