"""python -m torch_vdev.sanitize: runs a script under the sanitizer and summarises its findings."""

import subprocess
import sys

RACY = """
import sys
import torch
x = torch.ones(100, device="vdev")
side = torch.vdev.Stream()
with torch.vdev.stream(side):
    y = x * 2            # no wait_stream: a race
torch.empty(4, device="vdev").sum()   # an uninitialized read (with --tool init)
torch.vdev.synchronize()
print("done", sys.argv[1:])
"""

CLEAN = """
import torch
x = torch.ones(100, device="vdev")
side = torch.vdev.Stream()
side.wait_stream(torch.vdev.current_stream())
with torch.vdev.stream(side):
    y = x * 2
torch.vdev.current_stream().wait_stream(side)
print(y.sum().item())
"""


def sanitize(tmp_path, source, *options):
    script = tmp_path / "script.py"
    script.write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "torch_vdev.sanitize", *options, str(script), "a", "--b"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_findings_are_summarised_and_the_script_goes_on(tmp_path):
    done = sanitize(tmp_path, RACY, "--tool", "streams,init")
    assert done.returncode == 1
    assert done.stdout.strip() == "done ['a', '--b']"
    summary = done.stderr[done.stderr.index("========= vdev sanitizer:") :]
    assert summary.startswith(
        "========= vdev sanitizer: 2 findings (1 data race, 1 uninitialized read)"
    )
    assert "[1] data race: aten::mul on vdev:0 stream" in summary
    assert "[2] uninitialized read: aten::sum" in summary
    assert f'File "{tmp_path / "script.py"}", line 7, in <module>' in summary


def test_stacks_begin_at_the_script_without_the_runners_frames(tmp_path):
    done = sanitize(tmp_path, RACY)
    summary = done.stderr[done.stderr.index("========= vdev sanitizer:") :]
    script = f'    File "{tmp_path / "script.py"}", line'
    for heading in ("The earlier access was queued at", "This access"):
        stack = summary.split(heading)[1].split("(most recent call last):\n")[1]
        assert stack.startswith(script), summary  # the outermost frame is the script's
    assert "runpy" not in summary and "torch_vdev/sanitize.py" not in summary, summary


SPAWNED = """
import torch
import torch.multiprocessing as mp


def rank(i):
    x = torch.ones(100, device="vdev")
    side = torch.vdev.Stream()
    with torch.vdev.stream(side):
        y = x * 2  # no wait_stream: a race, in the child
    torch.vdev.synchronize()
    print("child done", flush=True)


if __name__ == "__main__":
    mp.spawn(rank, nprocs=1)
    print("parent done")
"""


def test_findings_of_a_child_process_started_with_spawn_count(tmp_path):
    done = sanitize(tmp_path, SPAWNED)
    assert "child done" in done.stdout and "parent done" in done.stdout, done.stderr[-3000:]
    summary = done.stderr[done.stderr.index("========= vdev sanitizer:") :]
    assert summary.startswith("========= vdev sanitizer: 1 finding (1 data race)"), summary
    assert "[1] (in child process " in summary and ") data race: aten::mul on vdev:0" in summary
    assert f'File "{tmp_path / "script.py"}", line 10, in rank' in summary
    assert done.returncode == 1  # the script succeeded, but something was found


def test_a_clean_script_reports_nothing_and_keeps_its_status(tmp_path):
    done = sanitize(tmp_path, CLEAN)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "200.0"
    assert "========= vdev sanitizer: no findings" in done.stderr


def test_error_mode_raises_in_the_script(tmp_path):
    done = sanitize(tmp_path, RACY, "--error")
    assert done.returncode == 1
    assert "done" not in done.stdout
    assert "torch_vdev.vdev.sanitizer.StreamRaceError: data race" in done.stderr


def test_a_bad_tool_is_refused_naming_the_valid_ones(tmp_path):
    done = sanitize(tmp_path, CLEAN, "--tool", "races")
    assert done.returncode == 2
    assert "unknown tool 'races'" in done.stderr and "streams, init, poison and warn" in done.stderr
