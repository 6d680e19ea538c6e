"""Runtime layer: environment configuration and its parsers."""

import os
import re

import pytest

from child_process import run_python
from torch_vdev import _testing as rt


@pytest.mark.parametrize("text,expected", [("1", 1), ("2", 2), (" 8 ", 8), ("64", 64), ("007", 7)])
def test_parse_device_count_accepts(text, expected):
    assert rt.parse_device_count(text) == expected


@pytest.mark.parametrize("text", ["", "0", "65", "-1", "abc", "2.0", "1e3", "0x2", "2 2", "+2"])
def test_parse_device_count_rejects_naming_variable_value_and_range(text):
    with pytest.raises(ValueError) as info:
        rt.parse_device_count(text)
    msg = str(info.value)
    assert "VDEV_DEVICE_COUNT" in msg and f"'{text}'" in msg and "1..64" in msg


@pytest.mark.parametrize(
    "text,expected",
    [
        ("1024", 1024),
        ("4GiB", 4 << 30),
        ("512MiB", 512 << 20),
        ("2G", 2 << 30),
        ("3kb", 3 << 10),
        ("1T", 1 << 40),
        (" 7 M ", 7 << 20),
        ("100B", 100),
    ],
)
def test_parse_memory_size_accepts(text, expected):
    assert rt.parse_memory_size(text) == expected


@pytest.mark.parametrize("text", ["", "0", "-5", "GiB", "4XB", "4GiBs", "1.5G", "99999999999999T"])
def test_parse_memory_size_rejects_naming_variable_and_value(text):
    with pytest.raises(ValueError) as info:
        rt.parse_memory_size(text)
    assert "VDEV_DEVICE_MEMORY" in str(info.value) and f"'{text}'" in str(info.value)


@pytest.mark.parametrize("text,expected", [("1", 1), (" 3 ", 3), ("1024", 1024)])
def test_parse_thread_count_accepts(text, expected):
    assert rt.parse_thread_count(text) == expected


@pytest.mark.parametrize("text", ["", "0", "1025", "-1", "two", "1.5", "0x2"])
def test_parse_thread_count_rejects_naming_variable_value_and_range(text):
    with pytest.raises(ValueError) as info:
        rt.parse_thread_count(text)
    msg = str(info.value)
    assert "VDEV_DEVICE_THREADS" in msg and f"'{text}'" in msg and "1..1024" in msg


def test_default_device_threads_leave_one_core_to_the_host():
    assert rt.default_device_threads() == max(1, len(os.sched_getaffinity(0)) - 1)
    r = run_python("import torch_vdev; print(torch_vdev._C._device_threads())")
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == rt.default_device_threads()


def test_environment_sets_device_threads():
    r = run_python(
        "import torch_vdev; print(torch_vdev._C._device_threads())",
        env={"VDEV_DEVICE_THREADS": "3"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["3"]


def test_environment_sets_count_and_capacity():
    r = run_python(
        """
        import torch
        p = torch.vdev.get_device_properties(3)
        print(torch.vdev.device_count(), torch.accelerator.device_count(), p.total_memory)
        """,
        env={"VDEV_DEVICE_COUNT": "4", "VDEV_DEVICE_MEMORY": "64MiB"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["4", "4", str(64 << 20)]


def test_default_configuration_is_two_devices_of_4GiB():
    r = run_python(
        "import torch; "
        "print(torch.vdev.device_count(), torch.vdev.get_device_properties(0).total_memory)"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["2", str(4 << 30)]


@pytest.mark.parametrize(
    "env,needle",
    [
        ({"VDEV_DEVICE_COUNT": "abc"}, "VDEV_DEVICE_COUNT='abc'"),
        ({"VDEV_DEVICE_COUNT": "0"}, "VDEV_DEVICE_COUNT='0'"),
        ({"VDEV_DEVICE_COUNT": "100"}, "VDEV_DEVICE_COUNT='100'"),
        ({"VDEV_DEVICE_MEMORY": "lots"}, "VDEV_DEVICE_MEMORY='lots'"),
        ({"VDEV_DEVICE_THREADS": "0"}, "VDEV_DEVICE_THREADS='0'"),
        # More than any machine's address space (two views per device): refused at configuration,
        # not reported available and then failing every allocation.
        ({"VDEV_DEVICE_MEMORY": "100000TiB"}, "more than this machine can reserve"),
    ],
)
def test_malformed_environment_keeps_import_safe_and_fails_clearly_on_use(env, needle):
    r = run_python(
        """
        import warnings
        import torch
        assert not torch.vdev.is_available()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            assert torch.vdev.device_count() == 0
            assert torch.accelerator.device_count() == 0
        assert any("unavailable" in str(x.message) for x in w), [str(x.message) for x in w]
        for use in (lambda: torch.zeros(1, device="vdev"), lambda: torch.vdev.set_device(0)):
            try:
                use()
            except RuntimeError as e:
                print("ERR", e)
            else:
                raise SystemExit("no error")
        """,
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    errors = [line for line in r.stdout.splitlines() if line.startswith("ERR")]
    assert len(errors) == 2 and all(needle in line for line in errors), r.stdout


def test_the_largest_device_memory_the_refusal_names_works():
    refused = run_python(
        "import torch\ntry:\n    torch.zeros(1, device='vdev')\nexcept RuntimeError as e:\n"
        "    print(e)\n",
        env={"VDEV_DEVICE_MEMORY": "100000TiB"},
    )
    match = re.search(r"at most (\d+) GiB per device", refused.stdout)
    assert match, refused.stdout + refused.stderr
    largest = int(match.group(1))
    r = run_python(
        "import torch\nx = torch.ones(1024, device='vdev')\n"
        "print(torch.vdev.get_device_properties(0).total_memory, (x * 2).sum().item())\n",
        env={"VDEV_DEVICE_MEMORY": f"{largest}GiB"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(largest << 30), "2048.0"]
