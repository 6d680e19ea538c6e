"""The suite's per-test timeout (pyproject.toml: pytest-timeout, "thread" method): a test that
blocks in a host wait behind a closed gate fails, with the stacks of its threads, instead of
hanging CI."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

BLOCKED = """
import torch
from torch_vdev import _testing as rt


def test_blocked_behind_a_closed_gate():
    s = torch.vdev.current_stream()
    rt.enqueue_gate(s.device_index, s.stream_id, rt.Gate())  # never opened
    torch.vdev.synchronize()  # a host wait inside C++, as a regression would make
"""


def test_a_test_blocked_behind_a_closed_gate_fails_instead_of_hanging(tmp_path):
    (tmp_path / "test_blocked.py").write_text(BLOCKED)
    # The repository's configuration, with only the timeout shortened.
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml")]
        + ["--rootdir", str(tmp_path), "-p", "no:cacheprovider", "-o", "timeout=2"]
        + [str(tmp_path / "test_blocked.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,  # a bound on the hang this test rules out, not a timing assertion
    )
    out = r.stdout + r.stderr
    assert r.returncode == 1, out  # the thread method's os._exit(1): the run fails
    assert "Timeout" in out, out
    # The main thread's stack shows where the test waited.
    assert "in test_blocked_behind_a_closed_gate" in out, out
    assert "torch.vdev.synchronize()" in out, out
