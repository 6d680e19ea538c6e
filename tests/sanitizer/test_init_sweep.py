"""No false alarm from the init tool on PyTorch's own databases (issue 50): op_db (every operator
in every dtype CUDA declares, its out= variant with fresh out= tensors, its backward), module_db
(every module in training and evaluation mode, forward and backward) and optim_db (every
optimizer in every implementation) run under VDEV_SANITIZER=init, and every report is either
listed as true in init_expected_reports.txt (the operator really reads unwritten memory) or a
failure of this test.

CI runs one sample per operator in float32, float16, complex64 and int64, two inputs per module
in float32, and optim_db in float32. VDEV_OPINFO_FULL=1 runs every sample in every dtype (about
four minutes), VDEV_MODULES_FULL=1 every module input in float32 and float64,
VDEV_CONFORMANCE_FULL=1 optim_db in float64 too (tests/ops/test_optim_db.py's own switch).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sweeps import expected_failures, run_sweep

from child_process import child_env

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LIST = HERE / "init_expected_reports.txt"
FULL_OPS = os.environ.get("VDEV_OPINFO_FULL") == "1"
FULL_MODULES = os.environ.get("VDEV_MODULES_FULL") == "1"

OP_DTYPES = (
    [
        "float32",
        "float64",
        "float16",
        "bfloat16",
        "complex64",
        "complex128",
        "complex32",
        "int64",
        "int32",
        "int16",
        "int8",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "bool",
        "float8_e4m3fn",
        "float8_e5m2",
    ]  # fmt: skip
    if FULL_OPS
    else ["float32", "float16", "complex64", "int64"]
)


def assert_only_listed_reports(rows: list[dict], dtype: str) -> None:
    self_check = [r for r in rows if r["name"] == "self-check"]
    assert self_check and self_check[0]["status"] == "report", "the init tool did not report"
    reports = {r["name"]: r["msg"] for r in rows if r["status"] == "report"}
    reports.pop("self-check")
    expected = expected_failures(LIST, dtype)
    unexpected = {n: m for n, m in reports.items() if n not in expected}
    assert not unexpected, "false reports of the init tool:\n" + "\n".join(
        f"  {n}: {m}" for n, m in sorted(unexpected.items())
    )
    ran = {r["name"] for r in rows if r["status"] in ("pass", "report")}
    gone = sorted(n for n in expected if n in ran and n not in reports and FULL_OPS)
    assert not gone, f"no longer reported, remove from {LIST.name}: {gone}"


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("dtype", OP_DTYPES)
def test_op_db_runs_clean_under_the_init_tool(dtype):
    samples = "1000000" if FULL_OPS else "1"
    rows = run_sweep(HERE / "init_sweep.py", "ops", dtype, samples, min_rows=300)
    # The sweep ran: CI's dtypes cover most of op_db; few operators take uint16 or float8 on CUDA.
    common = ("float32", "float64", "float16", "bfloat16", "complex64", "int64", "int32")
    assert sum(r["status"] == "pass" for r in rows) >= (100 if dtype in common else 1)
    assert_only_listed_reports(rows, dtype)


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("dtype", ["float32", "float64"] if FULL_MODULES else ["float32"])
def test_module_db_runs_clean_under_the_init_tool(dtype):
    samples = "1000000" if FULL_MODULES else "2"
    rows = run_sweep(HERE / "init_sweep.py", "modules", dtype, samples, min_rows=100)
    assert sum(r["status"] == "pass" for r in rows) >= 100
    assert_only_listed_reports(rows, dtype)


@pytest.mark.timeout(1800)
def test_optim_db_runs_clean_under_the_init_tool():
    env = child_env({"VDEV_SANITIZER": "init"})
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/ops/test_optim_db.py",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "uninitialized read" not in output
    assert " passed" in output
