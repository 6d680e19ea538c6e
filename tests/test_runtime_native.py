"""The native C++ tests, built with plain CMake without Python bindings: the runtime's
(cpp/runtime/tests, no torch) and the caching allocator core's (cpp/backend/tests, c10 only).

They cover what is awkward from Python: many threads flipping their thread-local current device,
concurrent allocation and lookup against the memory table, many threads sharing one device cache
with record_stream and concurrent empty_cache, exact accounting. The same binaries are what the
sanitizer builds run (README, Development)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
    subprocess.run(
        [cmake, "-S", str(ROOT), "-B", str(build), *options, *generator],
        check=True,
        capture_output=True,
    )
    subprocess.run([cmake, "--build", str(build)], check=True, capture_output=True)
    return build


@pytest.mark.parametrize("binary", ["vdevrt_tests", "device_cache_tests"])
def test_native_cpp_tests_pass(native_build, binary):
    r = subprocess.run([str(native_build / binary)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK: 0 failure(s)" in r.stdout
