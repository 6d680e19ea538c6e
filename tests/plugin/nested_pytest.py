"""Running pytest on a sample suite in a nested process, as a user's CI would, and reading back
each test's outcome from its JUnit report.

Each nested run gets a copy of the samples in a folder of its own with its own pytest.ini, so
that neither this repository's pyproject.toml (addopts, timeout) nor tests/conftest.py applies
to it, and the VDEV_* variables and the harness variables the plugin sets are cleared from its
environment (as conftest.run_python does).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from child_process import child_env

SAMPLES = Path(__file__).resolve().parent / "sample_suite"
PLUGIN = "torch_vdev.pytest_plugin"
USAGE_ERROR = 4  # pytest.ExitCode.USAGE_ERROR
# Besides the runtime's variables (child_env): what steers pytest and the libraries' harnesses.
CLEARED = (
    "PYTEST_ADDOPTS",
    "PYTEST_PLUGINS",
    # What the plugin sets for the libraries' harnesses (torch_vdev.testing.ENVIRONMENT), and
    # what else steers them.
    "TRANSFORMERS_TEST_DEVICE",
    "TRANSFORMERS_TEST_BACKEND",
    "TRANSFORMERS_TEST_DEVICE_SPEC",
    "DIFFUSERS_TEST_DEVICE",
    "DIFFUSERS_TEST_BACKEND",
    "DIFFUSERS_TEST_DEVICE_SPEC",
    "ACCELERATE_TORCH_DEVICE",
    "PYTORCH_TESTING_DEVICE_ONLY_FOR",
    "PYTORCH_TESTING_DEVICE_EXCEPT_FOR",
    "PYTORCH_TESTING_DEVICE_FOR_CUSTOM",
    "TORCH_DEVICE",
)


@dataclass
class Run:
    returncode: int
    output: str
    outcomes: dict[str, tuple[str, str]]  # test name: (passed/failed/error/skipped, report text)

    def outcome(self, test: str) -> str:
        assert test in self.outcomes, f"{test} did not run:\n{self.output[-3000:]}"
        return self.outcomes[test][0]

    def report(self, test: str) -> str:
        self.outcome(test)
        return self.outcomes[test][1]


def _site(root: Path) -> Path:
    """A folder for PYTHONPATH: `early_vdev_user`, a plugin that uses vdev as it is imported."""
    site = root / "site"
    site.mkdir()
    (site / "early_vdev_user.py").write_text("import torch\n\ntorch.vdev.device_count()\n")
    return site


def run_suite(
    root: Path,
    samples: list[str],
    args: list[str],
    *,
    ini: str = "",
    conftest: str | None = None,
    env: dict[str, str] | None = None,
    source: Path = SAMPLES,
    pythonpath: list[Path] = (),
) -> Run:
    """Runs pytest with ``args`` on copies of ``samples`` (files of ``source``); ``pythonpath``
    comes before the site folder of _site()."""
    suite = root / "suite"
    suite.mkdir(parents=True)
    for name in samples:
        shutil.copy(source / name, suite / name)
    (suite / "pytest.ini").write_text(f"[pytest]\npython_files = sample_*.py\n{ini}\n")
    if conftest is not None:
        (suite / "conftest.py").write_text(conftest)
    full_env = child_env(clear=CLEARED)
    full_env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), str(_site(root))])
    full_env.update(env or {})
    junit = root / "junit.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--junitxml={junit}"]
        + args,
        cwd=suite,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    outcomes: dict[str, tuple[str, str]] = {}
    if junit.exists():
        for case in ET.parse(junit).iter("testcase"):
            outcome, text = "passed", ""
            for child in case:
                if child.tag in ("failure", "error", "skipped"):
                    outcome = {"failure": "failed"}.get(child.tag, child.tag)
                    text = f"{child.get('message', '')}\n{child.text or ''}"
                    break
            outcomes[case.get("name", "")] = (outcome, text)
    return Run(done.returncode, done.stdout + done.stderr, outcomes)
