"""vdev against CPU on PyTorch's own operator database (OpInfo op_db): every operator in every
dtype its OpInfo declares for CUDA, forward values and strides, method and in-place variants,
gradients, forward-mode AD, the out= contract and every error input (tests/ops/opinfo_sweep.py
says what each check compares).

CI runs every check in every dtype on one sample per operator, and every error input (about four
minutes on two cores). The full sweep, VDEV_OPINFO_FULL=1, runs every sample, the reference
inputs, and noncontiguous inputs. Each failure is listed, with its reason, in
opinfo_expected_failures.txt; a test fails for a failure that is not listed and for a listed one
that now passes (remove it from the list). A crash of the sweep fails the test (it runs in its
own process). VDEV_OPINFO_ROWS=DIR writes each sweep's rows to DIR/DTYPE.jsonl, for the figures in
docs/conformance.md (counted by tests/ops/opinfo_figures.py).
"""

import json
import os
from collections import Counter
from pathlib import Path

import pytest
import torch
from sweeps import expected_failures_by_check, run_sweep

HERE = Path(__file__).resolve().parent
FULL = os.environ.get("VDEV_OPINFO_FULL") == "1"
LIST = HERE / "opinfo_expected_failures.txt"

DTYPES = [
    "float32", "float64", "float16", "bfloat16", "complex64", "complex128", "complex32",
    "int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "uint64", "bool",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
]  # fmt: skip
if hasattr(torch, "bcomplex32"):  # torch 2.14's experimental dtype (OpInfo: only `to` on CUDA)
    DTYPES.append("bcomplex32")
CHECKS = ["forward", "strides", "variants", "backward", "fwad", "out"]


def dump(rows: list[dict], name: str) -> None:
    if out := os.environ.get("VDEV_OPINFO_ROWS"):
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def assert_as_listed(rows: list[dict], dtype: str) -> Counter:
    """No failure that the list lacks, no listed failure that passes; the statuses counted."""
    expected = expected_failures_by_check(LIST, dtype)
    failing = {(r["check"], r["op"]): r["msg"] for r in rows if r["status"] == "fail"}
    # Passing everywhere: the full sweep adds rows of other inputs for the same pairs.
    passing = {(r["check"], r["op"]) for r in rows if r["status"] == "pass"} - failing.keys()
    unexpected = {k: m for k, m in failing.items() if k not in expected}
    assert not unexpected, "unexpected failures:\n" + "\n".join(
        f"  {check} {op}: {msg}" for (check, op), msg in sorted(unexpected.items())
    )
    # An entry whose reason starts "full sweep:" fails only on samples CI's slice does not run.
    fixed = sorted(
        k for k in expected if k in passing and (FULL or not expected[k].startswith("full sweep:"))
    )
    assert not fixed, f"now passing, remove from {LIST.name}: {fixed}"
    return Counter((r["check"], r["status"]) for r in rows)


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("dtype", DTYPES)
def test_operators_match_cpu(dtype):
    samples = "1000000" if FULL else "1"
    args = [dtype, samples, "--checks", ",".join(CHECKS)]
    rows = run_sweep(HERE / "opinfo_sweep.py", *args, min_rows=1)
    if FULL:
        rows += run_sweep(HERE / "opinfo_sweep.py", *args, "--reference", min_rows=1)
        rows += run_sweep(HERE / "opinfo_sweep.py", *args[:2], "noncontiguous", min_rows=1)
    dump(rows, dtype)
    count = assert_as_listed(rows, dtype)
    for check in CHECKS:
        passed, failed = count[(check, "pass")], count[(check, "fail")]
        if passed + failed >= 100:  # the 99% target, where one failure is not already 1%
            rate = passed / (passed + failed)
            assert rate >= 0.99, f"{check}: only {rate:.2%} of operators with a reference pass"


def test_every_dtype_cuda_declares_is_swept():
    """DTYPES covers every dtype some OpInfo declares for CUDA."""
    from torch.testing._internal.common_methods_invocations import op_db

    declared = {str(d).removeprefix("torch.") for op in op_db for d in op.supported_dtypes("cuda")}
    assert declared <= set(DTYPES), sorted(declared - set(DTYPES))


def test_error_inputs_raise_at_the_call():
    rows = run_sweep(HERE / "opinfo_sweep.py", "errors", min_rows=150)
    dump(rows, "errors")
    count = assert_as_listed(rows, "*")
    inputs = sum(int(r["msg"].split()[0]) for r in rows if r["status"] == "pass")
    assert inputs >= 600, f"only {inputs} error inputs checked"
    assert count[("errors", "fail")] == 0 or inputs / (inputs + count[("errors", "fail")]) >= 0.99
