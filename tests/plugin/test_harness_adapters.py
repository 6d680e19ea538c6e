"""The libraries' own test harnesses run their device tests on vdev with one switch (--vdev):
test files written in each harness's style (harness_samples/suites) run in nested pytest
processes, and each test's outcome says whether the harness saw vdev.

In CI the Hugging Face libraries are not installed: their harness modules are stand-ins with the
structure vdev's adapter relies on (harness_samples/standins). With ``VDEV_TEST_HARNESSES=real``
the same files run against the accelerate, PEFT and transformers installed in the environment
(skipped where one is missing), and the adapter's manifest is checked against them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from child_process import child_env
from nested_pytest import CLEARED, USAGE_ERROR, Run, run_suite

HERE = Path(__file__).resolve().parent / "harness_samples"
SUITES = HERE / "suites"
STANDINS = HERE / "standins"
REAL = os.environ.get("VDEV_TEST_HARNESSES") == "real"
HF = ["sample_accelerate.py", "sample_peft.py", "sample_transformers.py"]
ALL = [*HF, "sample_diffusers.py", "sample_timm.py"]


def _libraries_or_skip() -> None:
    if REAL:
        missing = [m for m in ("accelerate", "peft", "transformers") if not _installed(m)]
        if missing:
            pytest.skip(f"VDEV_TEST_HARNESSES=real: not installed: {', '.join(missing)}")


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def run(
    root: Path,
    samples: list[str],
    args: list[str],
    env: dict[str, str] | None = None,
    ini: str = "",
    standins: Path = STANDINS,
    conftest: str | None = None,
) -> Run:
    _libraries_or_skip()
    # testing_utils.py: the suite-local harness of diffusers' style.
    return run_suite(
        root,
        [*samples, "testing_utils.py"],
        [*args, *samples],
        env=env,
        ini=ini,
        conftest=conftest,
        source=SUITES,
        pythonpath=[] if REAL else [standins],
    )


# --- one switch: --vdev ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def with_plugin(tmp_path_factory: pytest.TempPathFactory) -> Run:
    # timm's suite reads its own variable: the one line its docs give.
    # -v cancels the nested run's -q: the report header shows.
    return run(tmp_path_factory.mktemp("with"), ALL, ["--vdev", "-v"], env={"TORCH_DEVICE": "vdev"})


@pytest.fixture(scope="module")
def without_plugin(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run(tmp_path_factory.mktemp("without"), HF + ["sample_diffusers.py"], [])


DEVICE_TESTS = [
    "test_a_model_runs_on_the_accelerator",  # accelerate: require_non_cpu
    "test_accelerate_puts_models_on_the_accelerator",  # accelerate: PartialState.default_device
    "test_multi_device",  # accelerate: require_multi_device (2 devices)
    "test_a_low_rank_update_on_the_accelerator",  # PEFT: get_backend()
    "test_a_model_split_over_two_devices",  # PEFT: device_count from get_backend()
    "test_an_adapter_saved_and_loaded_to_the_device",  # safetensors' load_file to vdev
    "test_seeded_forward_is_reproducible",  # transformers: require_torch_accelerator
    "test_memory_tables_follow_the_device",  # transformers: backend_memory_allocated & co
    "test_multi_accelerator",  # transformers: backend_device_count
    "test_a_denoising_step_on_the_accelerator",  # diffusers: DIFFUSERS_TEST_DEVICE
]


def test_without_the_plugin_the_harnesses_skip_their_device_tests(without_plugin: Run):
    # Why the adapters exist: on a machine whose accelerator is vdev, every harness says "cpu".
    for test in DEVICE_TESTS:
        assert without_plugin.outcome(test) == "skipped", test
    # PEFT's infer_device() says cpu, and so does get_backend(): they agree, on the wrong device.
    assert without_plugin.outcome("test_infer_device_names_the_accelerator") == "passed"


def test_with_the_plugin_each_harness_runs_its_device_tests_on_vdev(with_plugin: Run):
    for test in DEVICE_TESTS + [
        "test_get_backend_names_the_same_device",
        "test_infer_device_names_the_accelerator",  # PEFT's infer_device() says vdev too
        "test_fp16",  # transformers' capability probes, on vdev
        "test_bf16",
        "test_a_block_forward_and_backward[1]",  # timm: TORCH_DEVICE=vdev
        "test_a_block_forward_and_backward[3]",
    ]:
        assert with_plugin.outcome(test) == "passed", f"{test}: {with_plugin.report(test)}"
    # Two devices (vdev's default): a single-device test is skipped, as on a two-GPU machine.
    assert with_plugin.outcome("test_single_device") == "skipped"
    assert "harness variables set: TRANSFORMERS_TEST_DEVICE=vdev" in with_plugin.output


def test_one_device_runs_the_single_device_tests_and_skips_the_multi_device_ones(tmp_path: Path):
    got = run(tmp_path, HF, ["--vdev-devices", "1"])
    assert got.outcome("test_single_device") == "passed", got.output[-3000:]
    for test in ("test_multi_device", "test_a_model_split_over_two_devices"):
        assert got.outcome(test) == "skipped", test
    assert got.outcome("test_multi_accelerator") == "skipped"
    assert got.outcome("test_a_model_runs_on_the_accelerator") == "passed"


@pytest.mark.parametrize(
    "variable, skipped",
    [
        (
            "ACCELERATE_TORCH_DEVICE",
            [
                "test_a_model_runs_on_the_accelerator",
                "test_accelerate_puts_models_on_the_accelerator",
            ],
        ),
        ("TRANSFORMERS_TEST_DEVICE", ["test_seeded_forward_is_reproducible"]),
    ],
)
def test_a_harness_variable_already_set_wins(tmp_path: Path, variable: str, skipped: list[str]):
    got = run(tmp_path, HF, ["--vdev"], env={variable: "cpu"})
    for test in skipped:
        assert got.outcome(test) == "skipped", f"{test}: {got.output[-3000:]}"
    # The other libraries still see vdev.
    other = "test_memory_tables_follow_the_device" if "ACCEL" in variable else "test_multi_device"
    assert got.outcome(other) == "passed"


@pytest.mark.parametrize("switch", [["--vdev"], ["-p", "torch_vdev.pytest_plugin"]])
def test_a_conftest_that_imports_its_harness_sees_vdev(tmp_path: Path, switch: list[str]):
    # diffusers' tests/conftest.py imports its testing_utils, which reads DIFFUSERS_TEST_DEVICE
    # once: the plugin sets it before the conftests are imported, for --vdev as for -p.
    got = run(
        tmp_path,
        ["sample_diffusers.py"],
        switch,
        conftest="from testing_utils import torch_device  # noqa: F401\n",
    )
    assert got.outcome("test_a_denoising_step_on_the_accelerator") == "passed", got.output[-3000:]


def test_a_harness_imported_before_the_plugin_is_adapted_in_its_copies_too(tmp_path: Path):
    # A plugin named with -p is imported before the plugin installs the adapters: accelerate's
    # harness, and the package's copies of its globals, exist already.
    site = tmp_path / "early"
    site.mkdir()
    (site / "early_accelerate_user.py").write_text("import accelerate.test_utils  # noqa: F401\n")
    _libraries_or_skip()
    got = run_suite(
        tmp_path / "run",
        ["sample_accelerate.py"],
        ["-p", "early_accelerate_user", "--vdev", "sample_accelerate.py"],
        source=SUITES,
        pythonpath=[site] if REAL else [site, STANDINS],
    )
    assert got.outcome("test_a_model_runs_on_the_accelerator") == "passed", got.output[-3000:]
    assert got.outcome("test_multi_device") == "passed"


def test_a_plugin_enabled_after_the_harness_read_its_variable_is_a_usage_error(tmp_path: Path):
    # Without the entry point, a conftest's pytest_plugins loads the plugin after that conftest
    # imported transformers' harness, which read TRANSFORMERS_TEST_DEVICE (unset: cpu) already.
    conftest = "import transformers.testing_utils  # noqa: F401\n\n"
    conftest += 'pytest_plugins = ["torch_vdev.pytest_plugin"]\n'
    _libraries_or_skip()
    got = run_suite(
        tmp_path,
        ["sample_transformers.py"],
        ["--vdev", "sample_transformers.py"],
        conftest=conftest,
        env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        source=SUITES,
        pythonpath=[] if REAL else [STANDINS],
    )
    assert got.returncode == USAGE_ERROR, got.output[-3000:]
    assert "TRANSFORMERS_TEST_DEVICE=vdev: transformers.testing_utils was imported before" in (
        got.output
    )
    assert "its torch_device is 'cpu'" in got.output and "-p torch_vdev.pytest_plugin" in got.output
    assert not got.outcomes


# --- capability probes answer as the profile's device would ---------------------------------------


def _profile_without(tmp_path: Path, *missing: str) -> str:
    dtypes = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8"]
    dtypes += ["uint8", "bool", "complex64", "complex128"]
    profile = tmp_path / "profile.json"
    profile.write_text(
        json.dumps(
            {
                "name": "Vendor X1",
                "capability": [8, 0],
                "memory": "1GiB",
                "dtypes": [d for d in dtypes if d not in missing],
            }
        )
    )
    return str(profile)


@pytest.mark.parametrize(
    "profile, fp16, bf16",
    [
        ("sm75", "passed", "passed"),  # a T4: bfloat16 emulated, as CUDA answers there
        ("no-bfloat16", "passed", "skipped"),
        ("no-half", "skipped", "skipped"),
    ],
)
def test_capability_probes_answer_as_the_profiles_device(
    tmp_path: Path, profile: str, fp16: str, bf16: str
):
    if profile == "no-bfloat16":
        profile = _profile_without(tmp_path, "bfloat16")
    elif profile == "no-half":
        profile = _profile_without(tmp_path, "bfloat16", "float16")
    got = run(tmp_path, ["sample_transformers.py"], ["--vdev"], env={"VDEV_PROFILE": profile})
    assert got.outcome("test_fp16") == fp16, got.output[-3000:]
    assert got.outcome("test_bf16") == bf16
    # A probe that fails leaves nothing queued behind: the next tests pass.
    assert got.outcome("test_seeded_forward_is_reproducible") == "passed"


# --- the adapter's manifest against the installed version -----------------------------------------


def test_an_accelerate_that_no_longer_fits_is_refused_naming_what_changed(tmp_path: Path):
    if REAL:
        pytest.skip("changes the stand-in of accelerate")
    standins = tmp_path / "standins"
    shutil.copytree(STANDINS, standins)
    testing = standins / "accelerate" / "test_utils" / "testing.py"
    testing.write_text(testing.read_text().replace("def get_backend(", "def _get_backend("))
    testing.write_text(testing.read_text().replace("= get_backend()", "= _get_backend()"))
    (standins / "accelerate-1.15.0.dist-info").rename(standins / "accelerate-9.0.0.dist-info")
    meta = standins / "accelerate-9.0.0.dist-info" / "METADATA"
    meta.write_text(meta.read_text().replace("1.15.0", "9.0.0"))
    got = run(tmp_path / "run", ["sample_accelerate.py"], ["--vdev"], standins=standins)
    assert got.returncode != 0
    assert "HarnessAdapterError" in got.output
    assert "does not fit accelerate 9.0.0" in got.output
    assert "accelerate.test_utils.testing.get_backend is missing" in got.output
    assert "verified with accelerate 1.15.0" in got.output
    assert "ACCELERATE_TORCH_DEVICE=cpu" in got.output


@pytest.mark.skipif(not REAL, reason="VDEV_TEST_HARNESSES=real: the installed libraries")
def test_every_manifest_target_exists_in_the_installed_libraries():
    from torch_vdev.testing import huggingface

    _libraries_or_skip()
    for module in {t.module for t in huggingface.MANIFEST}:
        importlib.import_module(module)
    for target in huggingface.MANIFEST:
        usable = huggingface.check(target.distribution, target.module)
        installed = huggingface.version(target.distribution)
        if installed in target.verified:
            assert target in usable, f"{target.module}.{target.attribute} in {installed}"


# --- the device spec file, for the harnesses' own runners -----------------------------------------


def test_hf_spec_prints_the_spec_file_that_transformers_loads(tmp_path: Path):
    spec = subprocess.run(
        [sys.executable, "-m", "torch_vdev.testing", "hf-spec"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(spec).is_file() and spec.endswith(".py")
    # transformers imports the spec by module name from the working directory: the documented
    # recipe copies it there. Without the plugin, the spec alone points the harness at vdev.
    suite = tmp_path / "spec"
    shutil.copytree(SUITES, suite)
    shutil.copy(spec, suite / "vdev_spec.py")
    env = child_env(clear=CLEARED)
    env["TRANSFORMERS_TEST_DEVICE_SPEC"] = "vdev_spec.py"
    if not REAL:
        env["PYTHONPATH"] = str(STANDINS)
    _libraries_or_skip()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs"]
        + ["-k", "multi_accelerator or seeded", "sample_transformers.py"],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert "2 passed" in done.stdout  # the device count comes from the spec's DEVICE_COUNT_FN


def test_env_prints_what_the_plugin_sets():
    from torch_vdev import testing

    printed = subprocess.run(
        [sys.executable, "-m", "torch_vdev.testing", "env", "--format", "dotenv"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert dict(line.split("=", 1) for line in printed) == testing.environment()
    assert testing.environment()["TRANSFORMERS_TEST_DEVICE"] == "vdev"
