"""vdev against CPU on PyTorch's own operator database (OpInfo op_db).

float32 runs every operator; float64, int64, bool, bfloat16 and complex64 run a smaller sweep
(fewer samples per operator). VDEV_OPINFO_FULL=1 runs every sample of every operator. Operators
that fail are listed, with their reason, in opinfo_expected_failures.txt; the test fails for a
failure that is not listed and for a listed operator that now passes (remove it from the list).
"""

import os
from pathlib import Path

import pytest
from sweeps import expected_failures, run_sweep

HERE = Path(__file__).resolve().parent
FULL = os.environ.get("VDEV_OPINFO_FULL") == "1"
SAMPLES = {"float32": 3, "float64": 1, "int64": 1, "bool": 1, "bfloat16": 1, "complex64": 1}


@pytest.mark.parametrize("dtype", list(SAMPLES))
def test_operators_match_cpu(dtype):
    samples = 1_000_000 if FULL else SAMPLES[dtype]
    rows = run_sweep(HERE / "opinfo_sweep.py", dtype, str(samples), min_rows=101)
    status = {row["op"]: row for row in rows}
    expected = expected_failures(HERE / "opinfo_expected_failures.txt", dtype)
    failing = {op for op, row in status.items() if row["status"] == "fail"}
    unexpected = {op: status[op]["msg"] for op in failing - expected.keys()}
    assert not unexpected, "unexpected failures:\n" + "\n".join(
        f"  {op}: {msg}" for op, msg in sorted(unexpected.items())
    )
    fixed = sorted(op for op in expected if status.get(op, {}).get("status") == "pass")
    assert not fixed, f"now passing, remove from opinfo_expected_failures.txt: {fixed}"
    passed = sum(row["status"] == "pass" for row in rows)
    rate = passed / (passed + len(failing))
    if dtype == "float32":
        assert rate >= 0.99, f"only {rate:.2%} of operators with a CPU reference pass"
