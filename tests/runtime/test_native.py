"""The C++ tests, registered with CTest and run through it: the runtime's (cpp/runtime/tests, no
torch), the caching allocator core's (cpp/backend/memory/tests, c10 only), the task blocks' and
the launch observers' (cpp/backend/common/tests), built with plain CMake without Python bindings.

They cover what is awkward from Python: many threads flipping their thread-local current device,
concurrent allocation and lookup against the memory table, many threads sharing one device cache
with record_stream and concurrent empty_cache, exact accounting. The same tests are what the
sanitizer builds run (docs/development.md: `ctest --test-dir build/asan`). This file only builds
them and runs `ctest`, so that the README's one test command runs every test."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CTEST_NAMES = {"runtime", "device_cache", "task_blocks", "launch_observers"}


@pytest.fixture(scope="module")
def native_build(tmp_path_factory):
    cmake = shutil.which("cmake")
    assert cmake, "cmake is a test dependency (pip install '.[test]')"
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    build = tmp_path_factory.mktemp("native") / "build"
    options = [
        "-DVDEV_BUILD_TESTS=ON",
        "-DVDEV_BUILD_CACHE_TESTS=ON",
        f"-DPython_EXECUTABLE={sys.executable}",
    ]
    for step in (
        [cmake, "-S", str(ROOT), "-B", str(build), *options, *generator],
        [cmake, "--build", str(build)],
    ):
        r = subprocess.run(step, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return build


# Above the suite's 300 s: a cold build of the C++ tests, then ctest's own 300 s bound per test.
@pytest.mark.timeout(900)
def test_ctest_runs_every_cpp_test_and_all_pass(native_build):
    ctest = shutil.which("ctest")
    assert ctest, "ctest comes with the cmake test dependency"
    listed = subprocess.run(
        [ctest, "--test-dir", str(native_build), "-N"], capture_output=True, text=True, check=True
    ).stdout
    missing = {name for name in CTEST_NAMES if f": {name}\n" not in listed + "\n"}
    assert not missing, f"C++ tests not registered with CTest: {missing}\n{listed}"
    r = subprocess.run(
        [ctest, "--test-dir", str(native_build), "--output-on-failure", "--timeout", "300"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout[-8000:] + r.stderr[-4000:]
    assert f"100% tests passed out of {len(CTEST_NAMES)}" in r.stdout, r.stdout
