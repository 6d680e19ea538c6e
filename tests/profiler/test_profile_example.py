"""examples/profile_training.py runs and writes a chrome trace whose device tracks hold the
training step's kernels and copies, and a memory timeline (issue 33, item 6)."""

import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "profile_training.py"


def test_the_profiling_example_writes_a_trace_and_a_memory_timeline(tmp_path):
    r = subprocess.run(
        [sys.executable, str(EXAMPLE), str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    events = json.loads((tmp_path / "vdev_trace.json").read_text())["traceEvents"]
    device = [e for e in events if e.get("ph") == "X" and e.get("pid") == 0]
    names = {e["name"] for e in device}
    assert "vdev_kernel<aten::addmm>" in names and any(n.startswith("Memcpy HtoD (") for n in names)
    assert any(e["name"] == "ac2g" for e in events)  # the flow arrows
    memory = list(tmp_path.glob("vdev_memory.*"))
    assert len(memory) == 1 and memory[0].stat().st_size > 0
    snapshot = tmp_path / "vdev_memory_snapshot.pickle"
    plot = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.cuda._memory_viz",
            "trace_plot",
            str(snapshot),
            "-o",
            str(tmp_path / "trace.html"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plot.returncode == 0, plot.stderr
    assert (tmp_path / "trace.html").stat().st_size > 0
