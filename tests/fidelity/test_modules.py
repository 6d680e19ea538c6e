"""Every torch.nn module of PyTorch's module database (ModuleInfo module_db) against CPU: outputs,
input and parameter gradients and buffers, in training and in evaluation mode
(module_sweep.py). Two inputs per module and mode by default; VDEV_MODULES_FULL=1 runs every
input. Modules that fail are listed with their reason in module_expected_failures.txt; the test
fails for a failure that is not listed and for a listed module that now passes."""

import os
from pathlib import Path

import pytest
from sweeps import expected_failures, run_sweep

HERE = Path(__file__).resolve().parent
SAMPLES = 1_000_000 if os.environ.get("VDEV_MODULES_FULL") == "1" else 2


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_module_matches_cpu(dtype):
    rows = run_sweep(HERE / "module_sweep.py", dtype, str(SAMPLES), min_rows=100)
    failing = {row["module"]: row["msg"] for row in rows if row["status"] == "fail"}
    expected = expected_failures(HERE / "module_expected_failures.txt", dtype)
    unexpected = {m: msg for m, msg in failing.items() if m not in expected}
    assert not unexpected, "unexpected failures:\n" + "\n".join(
        f"  {m}: {msg}" for m, msg in sorted(unexpected.items())
    )
    fixed = sorted(m for m in expected if m not in failing)
    assert not fixed, f"now passing, remove from module_expected_failures.txt: {fixed}"
