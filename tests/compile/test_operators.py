"""Compiled == eager on vdev for a sweep of operators (issue 14, item 3).

CI compiles each family of operators as one function (one compilation per family, float32);
``VDEV_COMPILE_FULL=1`` compiles every operator alone, for float32, float64 and bfloat16."""

import os

import pytest
import torch
from torch._inductor.utils import run_and_get_code

FULL = os.environ.get("VDEV_COMPILE_FULL") == "1"

UNARY = {
    "abs": torch.abs, "neg": torch.neg, "exp": torch.exp, "log1p": lambda x: torch.log1p(x.abs()),
    "sqrt": lambda x: torch.sqrt(x.abs()), "rsqrt": lambda x: torch.rsqrt(x.abs() + 1),
    "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
    "erf": torch.erf, "relu": torch.relu, "gelu": torch.nn.functional.gelu,
    "silu": torch.nn.functional.silu, "floor": torch.floor, "round": torch.round,
    "reciprocal": lambda x: torch.reciprocal(x + 3), "clamp": lambda x: x.clamp(-0.5, 0.5),
    "sign": torch.sign, "square": torch.square,
}  # fmt: skip
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": lambda x, y: x / (y.abs() + 1),
    "pow": lambda x, y: torch.pow(x.abs() + 0.5, y), "maximum": torch.maximum,
    "minimum": torch.minimum, "atan2": torch.atan2, "where": lambda x, y: torch.where(x > y, x, y),
    "lerp": lambda x, y: torch.lerp(x, y, 0.3), "hypot": torch.hypot,
    "fmod": lambda x, y: torch.fmod(x, y.abs() + 1), "gt": lambda x, y: (x > y).to(x.dtype),
}  # fmt: skip
REDUCTIONS = {
    "sum": lambda x: x.sum(1), "mean": lambda x: x.mean(0), "amax": lambda x: x.amax(1),
    "amin": lambda x: x.amin(0), "prod": lambda x: (x.sigmoid() + 0.5).prod(1),
    "var": lambda x: x.var(1), "std": lambda x: x.std(0), "norm": lambda x: x.norm(dim=1),
    "logsumexp": lambda x: x.logsumexp(1), "softmax": lambda x: x.softmax(-1),
    "log_softmax": lambda x: x.log_softmax(0), "argmax": lambda x: x.argmax(1).to(x.dtype),
    "cumsum": lambda x: x.cumsum(1),
    "layer_norm": lambda x: torch.nn.functional.layer_norm(x, x.shape[1:]),
}  # fmt: skip
LAYOUT = {
    "transpose_add": lambda x: x.t() + 1, "slice": lambda x: x[1:, ::2] * 2,
    "cat": lambda x: torch.cat([x, x * 2], 1), "stack": lambda x: torch.stack([x, -x]),
    "permute_contiguous": lambda x: x.unsqueeze(0).permute(2, 0, 1).contiguous(),
    "index_select": lambda x: x.index_select(0, torch.tensor([2, 0, 1], device=x.device)),
    "gather": lambda x: x.gather(1, (x.abs() * 3).long().clamp(max=x.shape[1] - 1)),
    "masked_fill": lambda x: x.masked_fill(x > 0, 0.5), "flip": lambda x: x.flip(0),
    "pad": lambda x: torch.nn.functional.pad(x, (1, 2)), "tril": lambda x: x.tril(),
    "mm": lambda x: x @ x.t(), "expand_mul": lambda x: x[:, :1] * x,
}  # fmt: skip
FAMILIES = {"unary": UNARY, "binary": BINARY, "reductions": REDUCTIONS, "layout": LAYOUT}
TOLERANCE = {torch.float32: (1e-4, 1e-5), torch.float64: (1e-7, 1e-7), torch.bfloat16: (2e-2, 2e-2)}


def inputs(family: str, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(0)
    shape = (5, 37)  # not a multiple of the vector width: tails are exercised
    args = [torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype) for _ in range(2)]
    return tuple(a.to("vdev") for a in args[: 2 if family == "binary" else 1])


def check(fn, args, dtype):
    torch._dynamo.reset()
    got, code = run_and_get_code(torch.compile(fn), *args)
    code = "".join(code)
    assert "vdev_kernels.cpp_kernel(" in code or "extern_kernels" in code
    want = fn(*args)
    rtol, atol = TOLERANCE[dtype]
    for g, w in zip(got, want, strict=True):
        assert g.device.type == "vdev"
        torch.testing.assert_close(g.cpu(), w.cpu(), rtol=rtol, atol=atol)
    return code


@pytest.mark.parametrize("family", FAMILIES)
def test_family_compiled_as_one_function_matches_eager(family):
    ops = FAMILIES[family]

    def all_ops(*args):
        return tuple(op(*args) for op in ops.values())

    code = check(all_ops, inputs(family, torch.float32), torch.float32)
    assert "vdev_kernels.cpp_kernel(" in code  # generated kernels, not only fallbacks


CASES = [
    (family, name, dtype)
    for family, ops in FAMILIES.items()
    for name in ops
    for dtype in (torch.float32, torch.float64, torch.bfloat16)
]


@pytest.mark.skipif(not FULL, reason="every operator alone: VDEV_COMPILE_FULL=1")
@pytest.mark.parametrize("family,name,dtype", CASES, ids=[f"{n}-{d}" for _, n, d in CASES])
def test_operator_compiled_alone_matches_eager(family, name, dtype):
    op = FAMILIES[family][name]
    check(lambda *a: (op(*a),), inputs(family, dtype), dtype)
