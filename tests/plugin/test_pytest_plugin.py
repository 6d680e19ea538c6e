"""torch_vdev.pytest_plugin, run on the seeded sample suite (sample_suite/: a late error, leaks)
in nested pytest processes (nested_pytest.py): which test fails, with what message, and what the
run refuses.

torch-vdev's pytest11 entry point (pyproject.toml) registers the plugin in every nested run; it
is enabled by -p, an option or the ini file, and inert otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nested_pytest import PLUGIN, USAGE_ERROR, Run, run_suite

# --- queued errors and leaks: one run with the plugin, one without -------------------------------


@pytest.fixture(scope="module")
def with_plugin(tmp_path_factory: pytest.TempPathFactory) -> Run:
    # The leaks first: the first leaking test is the first to use vdev, which it initializes.
    samples = ["sample_leak.py", "sample_late_error.py"]
    return run_suite(
        tmp_path_factory.mktemp("with_plugin"),
        samples,
        ["-p", PLUGIN, "--vdev-leak-check", *samples],
    )


@pytest.fixture(scope="module")
def without_plugin(tmp_path_factory: pytest.TempPathFactory) -> Run:
    # The leaks first: the device-side assert of the late errors is sticky without the plugin.
    samples = ["sample_leak.py", "sample_late_error.py"]
    return run_suite(tmp_path_factory.mktemp("without_plugin"), samples, samples)


def test_without_the_plugin_a_queued_error_fails_the_next_test_instead(without_plugin: Run):
    # Why the plugin exists: the test that queued the failing operator passes ...
    assert without_plugin.outcome("test_queues_a_failing_operator") == "passed"
    # ... and the next one to synchronize the device gets its error ...
    assert without_plugin.outcome("test_next_test_uses_the_device") == "failed"
    assert "index 10 is out of bounds" in without_plugin.report("test_next_test_uses_the_device")
    # ... and, the device-side assert being sticky as on CUDA, so does every later test of vdev:0.
    assert without_plugin.outcome("test_last_test_uses_the_device") == "failed"
    assert "unusable since" in without_plugin.report("test_last_test_uses_the_device")
    # The leak check is off unless asked for.
    assert without_plugin.outcome("test_leaks_a_tensor") == "passed"


def test_a_queued_error_fails_the_test_that_queued_it_naming_the_device(with_plugin: Run):
    assert with_plugin.outcome("test_queues_a_failing_operator") == "failed"
    report = with_plugin.report("test_queues_a_failing_operator")
    assert "device work queued by this test's call failed on vdev:0" in report
    assert (
        "AcceleratorError: vdev error: device-side assert triggered: [aten::index] index 10"
        in report
    )
    assert "[aten::index] index 10 is out of bounds" in report
    assert "VDEV_LAUNCH_BLOCKING=1" in report
    assert "made its device unusable" in report


def test_a_test_that_handles_its_assert_passes_and_one_that_goes_on_fails_saying_why(
    with_plugin: Run,
):
    assert with_plugin.outcome("test_handles_its_assert_and_stops") == "passed"
    name = "test_handles_its_assert_then_uses_the_device_again"
    assert with_plugin.outcome(name) == "failed"
    report = with_plugin.report(name)
    assert "AcceleratorError" in report and "unusable since" in report
    assert "a device-side assert queued by this test made its device unusable" in report
    assert "vdev:0: first failure: [aten::index] index 10 is out of bounds" in report


def test_after_a_reported_error_the_next_test_passes(with_plugin: Run):
    # The error was raised (once) to the plugin's synchronize, and the device-side assert's lasting
    # state cleared: the device is clean and usable.
    assert with_plugin.outcome("test_next_test_uses_the_device") == "passed"
    assert with_plugin.outcome("test_after_its_own_failure_the_next_test_uses_the_device") == (
        "passed"
    )
    assert with_plugin.outcome("test_last_test_uses_the_device") == "passed"


def test_a_test_that_fails_on_its_own_keeps_its_failure_and_shows_the_queued_error(
    with_plugin: Run,
):
    name = "test_fails_on_its_own_after_queuing_a_failing_operator"
    assert with_plugin.outcome(name) == "failed"
    report = with_plugin.report(name)
    assert "AssertionError: its own failure" in report  # first: the test's own failure
    assert report.index("its own failure") < report.index("failed on vdev:1")  # then, a note
    assert "index 10 is out of bounds for dimension 0 with size 6 (on vdev:1" in report


def test_a_skip_does_not_hide_a_queued_error(with_plugin: Run):
    name = "test_skips_after_queuing_a_failing_operator"
    assert with_plugin.outcome(name) == "failed"
    report = with_plugin.report(name)
    assert "failed on vdev:0" in report and "The test then skipped: skipped after queuing" in report


def test_the_leak_check_fails_a_leaking_test_naming_size_device_and_stream(with_plugin: Run):
    assert with_plugin.outcome("test_leaks_a_tensor") == "failed"
    report = with_plugin.report("test_leaks_a_tensor")
    assert "vdev:0: 4096 bytes more (0 -> 4096 bytes allocated)" in report
    assert "vdev:0 stream 0 (the default stream): 4096 bytes (4000 requested)" in report
    # Not recording memory history: no stack, and how to get one.
    assert "_record_memory_history" in report and 'File "' not in report


def test_the_leak_check_names_only_the_tests_own_allocations_with_their_python_stack(
    with_plugin: Run,
):
    name = "test_leaks_a_tensor_while_history_records"
    assert with_plugin.outcome(name) == "failed"
    report = with_plugin.report(name)
    assert "vdev:0: 12288 bytes more (4096 -> 16384 bytes allocated)" in report
    assert "Allocations made by the test and still alive (1):" in report
    assert "12288 bytes (12000 requested)" in report
    assert "4000 requested" not in report  # the previous test's leak was there before this one
    side_stream = [line for line in report.splitlines() if "12000 requested" in line][0]
    assert "(the default stream)" not in side_stream  # allocated on a side stream
    # The stack from the test down to the allocation, most recent call last, without pytest's.
    stack = [line.strip() for line in report.splitlines() if line.strip().startswith("File ")]
    assert stack[-2].endswith(f"in {name}") and "sample_leak.py" in stack[-2]
    assert stack[-1].endswith("in _cache_on_a_side_stream")
    assert not any("_pytest" in line or "pluggy" in line for line in stack)


def test_tests_that_free_their_memory_pass_the_leak_check(with_plugin: Run):
    assert with_plugin.outcome("test_frees_what_it_allocates") == "passed"
    # Its tensor is freed by the garbage collector only, which the check runs first.
    assert with_plugin.outcome("test_a_temporary_freed_by_the_garbage_collector") == "passed"


# --- simulated hardware --------------------------------------------------------------------------


def _hardware(root: Path, args: list[str], **kwargs) -> dict:
    report = root / "hardware.json"
    run = run_suite(
        root, ["sample_hardware.py"], args, env={"VDEV_PLUGIN_REPORT": str(report)}, **kwargs
    )
    assert run.returncode == 0, run.output[-3000:]
    return json.loads(report.read_text())


def test_vdev_devices_and_vdev_memory_set_the_simulated_hardware(tmp_path: Path):
    seen = _hardware(tmp_path, ["-p", PLUGIN, "--vdev-devices", "3", "--vdev-memory", "64MiB"])
    assert seen == {"device_count": 3, "total_memory": [64 << 20] * 3}


def test_the_hardware_options_alone_enable_the_plugin(tmp_path: Path):
    seen = _hardware(tmp_path, ["--vdev-devices", "3"])
    assert seen["device_count"] == 3


def test_the_ini_file_sets_the_hardware_too(tmp_path: Path):
    seen = _hardware(tmp_path, [], ini="vdev_devices = 1\nvdev_memory = 32M")
    assert seen == {"device_count": 1, "total_memory": [32 << 20]}


@pytest.mark.parametrize(
    "option, value, expected",
    [
        ("--vdev-devices", "0", "expected an integer in 1..64"),
        ("--vdev-devices", "65", "expected an integer in 1..64"),
        ("--vdev-devices", "two", "expected an integer in 1..64"),
        ("--vdev-memory", "4XB", "unit K, M, G or T"),
        ("--vdev-memory", "0", "expected a positive number of bytes"),
        # Valid syntax, but more address space than the machine has: the runtime's own check.
        ("--vdev-memory", "100000T", "more than this machine can reserve"),
    ],
)
def test_a_bad_hardware_value_is_a_usage_error_naming_it(
    tmp_path: Path, option: str, value: str, expected: str
):
    run = run_suite(tmp_path, ["sample_inert.py"], ["-p", PLUGIN, option, value])
    assert run.returncode == USAGE_ERROR, run.output[-3000:]
    assert "ERROR: " in run.output and option in run.output and value in run.output
    assert expected in run.output
    assert not run.outcomes  # no test ran


def test_hardware_options_after_vdev_was_used_are_a_usage_error(tmp_path: Path):
    # A plugin loaded before (by -p) uses vdev as it is imported: the runtime read its
    # configuration already, 2 devices; asking for 3 cannot be honoured.
    run = run_suite(tmp_path, ["sample_inert.py"], ["-p", "early_vdev_user", "--vdev-devices=3"])
    assert run.returncode == USAGE_ERROR, run.output[-3000:]
    assert "--vdev-devices 3: too late" in run.output
    assert "VDEV_DEVICE_COUNT: 2" in run.output and "VDEV_DEVICE_COUNT=3" in run.output


# --- enabling: registered by the entry point, enabled by -p, an option or the ini file -----------


def test_registered_by_the_entry_point_it_stays_inert(tmp_path: Path):
    run = run_suite(tmp_path, ["sample_inert.py", "sample_late_error.py"], [])
    assert run.outcome("test_vdev_is_not_used") == "passed"
    # Not enabled: the late error still lands in the next test.
    assert run.outcome("test_queues_a_failing_operator") == "passed"
    assert run.outcome("test_next_test_uses_the_device") == "failed"
    assert "--vdev-leak-check" in run_suite(tmp_path / "help", [], ["--help"]).output


@pytest.mark.parametrize(
    "args, ini",
    [([], "vdev = true"), (["--vdev"], ""), (["-p", PLUGIN], "")],
    ids=["ini", "option", "p-and-entry-point"],
)
def test_it_is_enabled_by_an_option_the_ini_file_or_p(tmp_path: Path, args: list[str], ini: str):
    # -p with the entry point installed too: one registration (same name), no error.
    run = run_suite(tmp_path, ["sample_late_error.py"], args, ini=ini)
    assert run.outcome("test_queues_a_failing_operator") == "failed", run.output[-3000:]
    assert "failed on vdev:0" in run.report("test_queues_a_failing_operator")
    assert run.outcome("test_next_test_uses_the_device") == "passed"
