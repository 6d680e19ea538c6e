"""The runtime's own C++ tests (cpp/runtime/tests), built with plain CMake without torch or Python.

They cover what is awkward from Python: many threads flipping their thread-local current device,
concurrent allocation and lookup against the memory table, exact accounting. The same binary is
what the sanitizer builds run (README, Development)."""

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_runtime_cpp_tests_pass(tmp_path):
    cmake = shutil.which("cmake")
    assert cmake, "cmake is a test dependency (pip install '.[test]')"
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    build = tmp_path / "build"
    subprocess.run(
        [cmake, "-S", str(ROOT), "-B", str(build), "-DVDEV_BUILD_TESTS=ON", *generator],
        check=True,
        capture_output=True,
    )
    subprocess.run([cmake, "--build", str(build)], check=True, capture_output=True)
    r = subprocess.run([str(build / "vdevrt_tests")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK: 0 failure(s)" in r.stdout
