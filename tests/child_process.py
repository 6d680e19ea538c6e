"""The one way the suite starts another Python process: its environment is this process's without
the variables the vdev runtime reads (the child configures itself, from the values it is given),
and without torch's autoload switch. Importable from any test as ``child_process`` (tests/ is on
pytest's path through tests/conftest.py, which imports nothing from here a test needs)."""

import os
import subprocess
import sys
import textwrap

# What the runtime reads (cpp/runtime/config.h, docs/environment.md) and torch's autoload switch.
# The test-suite switches (VDEV_OPINFO_FULL, ...) are kept: a child suite runs as its parent does.
RUNTIME_VARIABLES = (
    "VDEV_DEVICE_COUNT",
    "VDEV_DEVICE_MEMORY",
    "VDEV_PROFILE",
    "VDEV_LAUNCH_BLOCKING",
    "VDEV_DEVICE_THREADS",
    "VDEV_SANITIZER",
    "VDEV_SANITIZER_FINDINGS_DIR",
    "VDEV_OOM_AFTER",
    "VDEV_DIST_FAULT",
    "TORCH_DEVICE_BACKEND_AUTOLOAD",
)


# The folders of shared test helpers (asyncutil, opinfo_sweep, ...): pytest's `pythonpath` (in
# pyproject.toml) for the suite, PYTHONPATH for a child, so that no test edits sys.path.
TESTS = os.path.dirname(os.path.abspath(__file__))
HELPER_PATHS = [TESTS, os.path.join(TESTS, "ops"), os.path.join(TESTS, "fidelity")]


def child_env(env: dict[str, str] | None = None, clear: tuple[str, ...] = ()) -> dict[str, str]:
    """This process's environment without RUNTIME_VARIABLES and `clear`, with the helper folders
    first on PYTHONPATH, then with `env`."""
    dropped = set(RUNTIME_VARIABLES) | set(clear)
    full = {k: v for k, v in os.environ.items() if k not in dropped}
    full["PYTHONPATH"] = os.pathsep.join(
        HELPER_PATHS + [p for p in full.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    full.update(env or {})
    return full


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 120):
    """Runs `code` in a fresh interpreter (fresh process-level state: env config, autoload)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=child_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
