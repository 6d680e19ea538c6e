"""Runs every module of PyTorch's module database (ModuleInfo module_db) on CPU and on vdev and
compares outputs, input and parameter gradients, and buffers, in training and in evaluation mode.

    python module_sweep.py DTYPE SAMPLES    # e.g. float32 2: at most 2 inputs per module and mode

Prints one JSON line per module: {"module", "status": "pass" | "fail", "msg"}. Run in its own
process by test_modules.py (the database imports PyTorch's test suite).
"""

import copy
import json
import sys

import torch
from torch.nn.modules.lazy import LazyModuleMixin
from torch.testing._internal.common_modules import module_db

# Modules whose outputs depend on random numbers: vdev's generators are not CPU's, so only their
# metadata is compared (distributions are tested in tests/random).
RANDOM = {"nn.FractionalMaxPool2d", "nn.FractionalMaxPool3d"}


def tensors_of(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_of(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors_of(v)]
    return []


def to_device(value, device):
    """A fresh leaf copy of every tensor (gradients required where the original required them)."""
    if isinstance(value, torch.Tensor):
        out = value.detach().clone().to(device)
        return out.requires_grad_(value.requires_grad)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    return value


def compare(got, want, what, metadata_only):
    assert len(got) == len(want), f"{what}: {len(got)} tensors, CPU {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if w is None or g is None:
            assert g is None and w is None, f"{what}[{i}]: defined on one device only"
            continue
        assert g.device.type == "vdev", f"{what}[{i}] is on {g.device}"
        assert g.shape == w.shape and g.dtype == w.dtype, f"{what}[{i}]: {g.shape} vs {w.shape}"
        if not metadata_only:
            torch.testing.assert_close(
                g.cpu(), w, equal_nan=True, msg=lambda m, i=i: f"{what}[{i}]: {m}"
            )


def make_module(info, sample, training, seed, dtype):
    """The module on the CPU, its parameters initialised (a lazy module is run once, so that the
    vdev copy starts from CPU's weights: moving lazy modules is tested in test_module_move.py)."""
    torch.manual_seed(seed)
    args = to_device(sample.constructor_input.args, "cpu")
    kwargs = to_device(sample.constructor_input.kwargs, "cpu")
    module = info.module_cls(*args, **kwargs).to(dtype)
    module.train(training)
    if isinstance(module, LazyModuleMixin):
        with torch.no_grad():
            module(*to_device(sample.forward_input.args, "cpu"),
                   **to_device(sample.forward_input.kwargs, "cpu"))  # fmt: skip
    return module


def run_one(info, sample, training, seed, dtype):
    results = {}
    for device in ("cpu", "vdev"):
        module = make_module(info, sample, training, seed, dtype)
        if device == "vdev":
            module = copy.deepcopy(module).to("vdev")
        fargs = to_device(sample.forward_input.args, device)
        fkwargs = to_device(sample.forward_input.kwargs, device)
        out = module(*fargs, **fkwargs)
        outs = tensors_of(out)
        leaves = [t for t in tensors_of((fargs, fkwargs)) if t.requires_grad]
        params = [p for p in module.parameters() if p.requires_grad]
        differentiable = [o for o in outs if o.requires_grad]
        grads = []
        if differentiable:
            loss = sum((o.float() * (i + 1)).sum() for i, o in enumerate(differentiable))
            grads = list(torch.autograd.grad(loss, leaves + params, allow_unused=True))
        results[device] = (outs, grads, [b for b in module.buffers()])
    metadata_only = info.name in RANDOM
    for part, name in ((0, "output"), (1, "gradient"), (2, "buffer")):
        compare(results["vdev"][part], results["cpu"][part], name, metadata_only)


def main() -> int:
    dtype, samples = getattr(torch, sys.argv[1]), int(sys.argv[2])
    for info in module_db:
        status, msg = "pass", ""
        try:
            modes = (True, False) if info.train_and_eval_differ else (True,)
            for training in modes:
                inputs = info.module_inputs_func(
                    info, device="cpu", dtype=dtype, requires_grad=True, training=training
                )
                for k, sample in enumerate(inputs[:samples]):
                    run_one(info, sample, training, seed=k, dtype=dtype)
            torch.vdev.synchronize()
        except Exception as e:  # noqa: BLE001 (any failure is the module's result)
            status, msg = "fail", f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
            try:
                torch.vdev.synchronize()
            except Exception:  # noqa: BLE001, S110 (an asynchronous error was reported above)
                pass
        print(json.dumps({"module": info.name, "status": status, "msg": msg}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
