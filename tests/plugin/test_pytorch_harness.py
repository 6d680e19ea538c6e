"""PyTorch's own test harness on vdev: a test file instantiated by instantiate_device_type_tests
(harness_samples/suites/sample_pytorch.py) runs in nested pytest processes and under PyTorch's
own runner; vdev is its PrivateUse1TestBase, with nothing to configure."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from child_process import child_env
from nested_pytest import Run, run_suite

SUITES = Path(__file__).resolve().parent / "harness_samples" / "suites"
SAMPLE = "sample_pytorch.py"


def run(root: Path, args: list[str], env: dict[str, str] | None = None, ini: str = "") -> Run:
    return run_suite(root, [SAMPLE], [*args, SAMPLE], env=env, ini=ini, source=SUITES)


def device_tests(run: Run) -> dict[str, str]:
    """The outcomes of the instantiated tests (test_no_device is a plain TestCase's)."""
    return {n: o for n, (o, _) in run.outcomes.items() if n != "test_no_device"}


def test_the_privateuse1_variants_run_on_vdev_next_to_the_cpu_ones(tmp_path: Path):
    got = run(tmp_path, ["--vdev"])
    ran = device_tests(got)
    assert ran["test_scale_vdev_float32"] == ran["test_scale_vdev_float16"] == "passed", got.output
    assert ran["test_scale_cpu_float32"] == "passed"  # the CPU variants too, unless filtered
    assert ran["test_two_devices_vdev"] == "passed"  # deviceCountAtLeast(2): vdev's devices
    # Without PyTorch's switch, @onlyCUDA skips on vdev, as it does on every PrivateUse1 device.
    assert ran["test_marked_cuda_but_device_generic_vdev"] == "skipped"
    assert "Only runs on cuda" in got.report("test_marked_cuda_but_device_generic_vdev")


def test_pytorch_testing_device_only_for_selects_vdevs_variants(tmp_path: Path):
    # "vdev" here; "privateuse1" (PyTorch's name for it, which the filter accepts too) below.
    got = run(tmp_path, ["--vdev"], env={"PYTORCH_TESTING_DEVICE_ONLY_FOR": "vdev"})
    ran = device_tests(got)
    assert ran and all(re.search(r"_vdev(_float16|_float32)?$", name) for name in ran), ran
    assert ran["test_scale_vdev_float32"] == "passed"


@pytest.mark.parametrize(
    "args, ini",
    [
        (["--vdev-bypass-device-restrictions"], ""),
        ([], "vdev_bypass_device_restrictions = true"),
    ],
    ids=["option", "ini"],
)
def test_the_bypass_switch_runs_onlycuda_tests_on_vdev(tmp_path: Path, args: list[str], ini: str):
    got = run(
        tmp_path,
        [*args, "-v"],  # -v cancels the nested run's -q: the report header shows
        env={"PYTORCH_TESTING_DEVICE_ONLY_FOR": "privateuse1"},
        ini=ini,
    )
    assert got.outcome("test_marked_cuda_but_device_generic_vdev") == "passed", got.output[-3000:]
    # PyTorch's switch lifts every @onlyOn: a test that is really CPU-only runs on vdev and fails.
    assert got.outcome("test_cpu_only_vdev") == "failed"
    # The switch alone enables the plugin: a queued error would fail its own test.
    assert "synchronized after each test" in got.output


HW_CLASSIFICATION = hasattr(
    importlib.import_module("torch.testing._internal.common_utils"), "HardwareClassification"
)


@pytest.mark.parametrize(
    "args",
    [
        [],
        pytest.param(
            ["--hw-classification", "ACCELERATOR"],
            marks=pytest.mark.skipif(not HW_CLASSIFICATION, reason="torch 2.15 and later"),
        ),
    ],
    ids=["plain", "hw-classification"],
)
def test_pytorchs_own_runner_runs_the_vdev_variants_without_pytest(tmp_path: Path, args):
    shutil.copy(SUITES / SAMPLE, tmp_path)
    env = child_env(clear=tuple(k for k in os.environ if k.startswith("PYTORCH_TEST")))
    # On a CI machine (CI set) PyTorch's runner writes XML reports, with unittest-xml-reporting.
    env.pop("CI", None)
    env["PYTORCH_TESTING_DEVICE_ONLY_FOR"] = "privateuse1"
    done = subprocess.run(
        [sys.executable, SAMPLE, "-v", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "test_scale_vdev_float32 (__main__.TestScalePRIVATEUSE1" in done.stderr
    assert "TestScaleCPU" not in done.stderr  # only the PrivateUse1 variants
    # The classification is inherited by the instantiated classes: the generic class is left out.
    assert ("test_no_device" in done.stderr) == (not args)
