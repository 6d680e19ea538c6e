"""Runs PyTorch's operator and module databases on vdev under the init tool and records every
report: on these correct programs any report is a false alarm (issue 50).

    python init_sweep.py ops DTYPE MAX_SAMPLES     # op_db: each operator's samples
    python init_sweep.py modules DTYPE MAX_SAMPLES # module_db: each module's inputs and modes

One JSON line per operator or module: {"name", "dtype", "status", "msg"}; status "pass", "report"
(an UninitializedReadError: its first line), or "skip" (nothing ran: no sample, the dtype is not
CUDA's, or every sample raised an error of its own, which the other sweeps judge).

What runs, with the tool on from the start (so that every input is made, and marked written, under
it): each sample's call, its outputs read back to the host (a program prints or compares them: a
fresh output vdev did not mark written would be reported there), and for floating samples the
backward of every differentiable output with respect to every input that requires a gradient,
those gradients read back too. Operators whose outputs are uninitialised memory by definition
(torch.empty and friends) run without the read-back. Operators with an out= variant run again with
fresh out= tensors (torch.empty_like of each result, and empty ones the call resizes), read back.
Random operators run as the others do: the tool judges reads, not values.
"""

import json
import sys

import opinfo_sweep  # tests/ops, on PYTHONPATH (tests/child_process.py)
import torch
from torch.utils._pytree import tree_flatten, tree_map

# Outputs that are uninitialised memory by definition (opinfo_sweep's list), and resizes that
# grow a tensor (the new elements are, as on CUDA).
UNINITIALISED_OUTPUT = opinfo_sweep.UNINITIALISED_OUTPUT | {"resize_", "resize_as_"}


def tensors(tree) -> list[torch.Tensor]:
    return [x for x in tree_flatten(tree)[0] if isinstance(x, torch.Tensor)]


def read_back(tree) -> None:
    for t in tensors(tree):
        if t.device.type == "vdev" and t.layout == torch.strided:
            t.cpu()


def first_line(e: BaseException) -> str:
    return str(e).splitlines()[0][:400] if str(e) else type(e).__name__


def run_guarded(fn) -> str | None:
    """None when `fn` ran clean; the report's first line when the init tool reported."""
    try:
        fn()
        torch.vdev.synchronize()
    except torch.vdev.sanitizer.UninitializedReadError as e:
        return first_line(e)
    finally:
        if torch.vdev.sanitizer.finding_count():
            # A report found where it could not raise (a host operator's callback) is kept.
            torch.vdev.sanitizer.clear_findings()
    return None


def with_out(op, s, out) -> None:
    """The call again with fresh out= tensors (torch.empty_like of each result, then empty ones
    that the call resizes), read back: an out= argument is written, never read."""
    flat = tree_flatten(out)[0]
    if not flat or not all(isinstance(x, torch.Tensor) for x in flat):
        return
    try:
        # Written memory first: a call that refuses these out= tensors raises its own error (whose
        # message may print them: a read of the program's, not the operator's).
        with torch.no_grad():
            op(
                s.input,
                *s.args,
                **s.kwargs,
                out=tree_map(lambda r: torch.zeros_like(r.detach()), out),
            )
        torch.vdev.synchronize()
    except torch.vdev.sanitizer.UninitializedReadError:
        raise
    except Exception:  # noqa: BLE001 (no out= for this sample)
        return
    for make in (torch.empty_like, lambda r: torch.empty(0, dtype=r.dtype, device=r.device)):
        fresh = tree_map(lambda r, make=make: make(r.detach()), out)
        with torch.no_grad():
            op(s.input, *s.args, **s.kwargs, out=fresh)
        read_back(fresh)


def self_check() -> None:
    """The tool is on: a read of torch.empty is reported (the test expects this row's report)."""
    reported = run_guarded(lambda: torch.empty(4, device="vdev").sum())
    status = "report" if reported else "pass"
    print(json.dumps({"name": "self-check", "dtype": "float32", "status": status, "msg": reported}))


def sweep_ops(dtype: torch.dtype, max_samples: int) -> None:
    from torch.testing._internal.common_methods_invocations import op_db

    for op in op_db:
        name = op.name + ("." + op.variant_test_name if op.variant_test_name else "")
        row = {"name": name, "dtype": str(dtype).removeprefix("torch."), "status": "skip"}
        if dtype not in op.supported_dtypes("cuda"):
            print(json.dumps({**row, "msg": "not a CUDA dtype"}), flush=True)
            continue
        grad = (
            op.supports_autograd
            and dtype.is_floating_point
            and dtype in op.supported_backward_dtypes("cuda")
        )
        ran = 0
        try:
            torch.manual_seed(0)
            samples = list(op.sample_inputs("vdev", dtype, requires_grad=grad))[:max_samples]
        except Exception as e:  # noqa: BLE001 (a sample function that cannot make device inputs)
            if isinstance(e, torch.vdev.sanitizer.UninitializedReadError):
                samples, row = [], {**row, "status": "report", "msg": "samples: " + first_line(e)}
            else:
                samples = []
        for s in samples:
            if row["status"] == "report":
                break

            def once(s=s, op=op):
                out = op(s.input, *s.args, **s.kwargs)
                if op.supports_out and op.name not in UNINITIALISED_OUTPUT:
                    with_out(op, s, out)
                if op.name not in UNINITIALISED_OUTPUT:
                    read_back(out)
                    leaves = [t for t in tensors((s.input, s.args, s.kwargs)) if t.requires_grad]
                    outs = [t for t in tensors(out) if t.requires_grad and t.grad_fn is not None]
                    if leaves and outs:
                        seeds = [torch.randn_like(o) for o in outs]
                        read_back(torch.autograd.grad(outs, leaves, seeds, allow_unused=True))

            try:
                reported = run_guarded(once)
                ran += 1
            except Exception:  # noqa: BLE001 (the sample's own error: other sweeps judge it)
                try:
                    torch.vdev.synchronize()
                except Exception:  # noqa: BLE001, S110 (its asynchronous error)
                    pass
                continue
            if reported:
                row = {**row, "status": "report", "msg": reported}
        if row["status"] != "report" and ran:
            row["status"] = "pass"
        print(json.dumps({**row, "msg": row.get("msg", f"{ran} samples")}), flush=True)


def sweep_modules(dtype: torch.dtype, max_samples: int) -> None:
    from module_sweep import make_module, tensors_of, to_device
    from torch.testing._internal.common_modules import module_db

    for info in module_db:
        row = {"name": info.name, "dtype": str(dtype).removeprefix("torch."), "status": "pass"}
        ran = 0
        modes = (True, False) if info.train_and_eval_differ else (True,)
        for training in modes:
            try:
                inputs = info.module_inputs_func(
                    info, device="cpu", dtype=dtype, requires_grad=True, training=training
                )
            except Exception:  # noqa: BLE001
                continue
            for k, sample in enumerate(inputs[:max_samples]):

                def once(sample=sample, k=k, training=training, info=info):
                    module = make_module(info, sample, training, seed=k, dtype=dtype).to("vdev")
                    fargs = to_device(sample.forward_input.args, "vdev")
                    fkwargs = to_device(sample.forward_input.kwargs, "vdev")
                    out = module(*fargs, **fkwargs)
                    read_back(tensors_of(out))
                    leaves = [t for t in tensors_of((fargs, fkwargs)) if t.requires_grad]
                    params = [p for p in module.parameters() if p.requires_grad]
                    outs = [o for o in tensors_of(out) if o.requires_grad]
                    if outs:
                        loss = sum((o.float() * (i + 1)).sum() for i, o in enumerate(outs))
                        grads = torch.autograd.grad(loss, leaves + params, allow_unused=True)
                        read_back([g for g in grads if g is not None])
                    read_back(list(module.buffers()))

                try:
                    reported = run_guarded(once)
                    ran += 1
                except Exception:  # noqa: BLE001 (judged by test_modules.py)
                    try:
                        torch.vdev.synchronize()
                    except Exception:  # noqa: BLE001, S110
                        pass
                    continue
                if reported and row["status"] != "report":
                    row = {**row, "status": "report", "msg": reported}
        if not ran:
            row["status"] = "skip"
        print(json.dumps({**row, "msg": row.get("msg", f"{ran} inputs")}), flush=True)


def main() -> int:
    kind, dtype, samples = sys.argv[1], getattr(torch, sys.argv[2]), int(sys.argv[3])
    torch.vdev.sanitizer.enable("init")
    self_check()
    {"ops": sweep_ops, "modules": sweep_modules}[kind](dtype, samples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
