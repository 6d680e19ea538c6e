"""Injected collective faults: VDEV_DIST_FAULT=RANK:N:abort|hang makes that rank's N-th collective
exit its process or never arrive, so that timeouts, a new group after a failure and torchrun's
restarts can be tested on one machine (backend/distributed/dist_fault.h). 2 processes each: these
runs are slow on small machines, so they are few."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

from child_process import child_env, run_python
from ranks import free_port, run_ranks
from torch_vdev import _testing as rt

TIMEOUT = 5  # the groups' timeout (init_process_group's), in seconds
EXIT_STATUS = 134  # backend/distributed/dist_fault.h: kDistFaultExitCode


def test_abort_exits_that_rank_at_its_nth_collective_and_the_peer_fails_at_once(tmp_path):
    env = {"VDEV_DIST_FAULT": "1:3:abort", "FAULT_TEST_TIMEOUT": str(TIMEOUT)}
    survivor, aborted = run_ranks("dist_fault", 2, tmp_path, timeout=120, env=env)
    assert aborted.returncode == EXIT_STATUS, aborted.stderr[-3000:]
    assert aborted.result == {}  # it never got to write its result: it exited in collective 3
    assert (
        "vccl c10d::allreduce: VDEV_DIST_FAULT=1:3:abort: rank 1 exits at its collective 3 "
        "(status 134)" in aborted.stderr
    ), aborted.stderr[-3000:]
    res = survivor.result
    assert survivor.returncode == 0, survivor.stderr[-3000:]
    assert res["done"] == [1, 2] and res["failed"] == 3, res
    # Gloo's error for a peer gone (the connection closed), not a timeout: well within it. As
    # NCCL's watchdog raises a failed collective: DistBackendError, naming the collective.
    assert res["failure"].startswith("DistBackendError") and "c10d::allreduce" in res["failure"]
    assert res["work_wait"].startswith("DistBackendError: vccl c10d::allreduce: "), res
    assert "Timed out" not in res["failure"], res["failure"]
    assert res["seconds"] < TIMEOUT, res
    # As after any failure, the group refuses its next collective at the call.
    assert res["after"].startswith("DistBackendError") and "failed earlier" in res["after"]


def test_hang_times_out_on_every_rank_and_a_new_group_works(tmp_path):
    env = {
        "VDEV_DIST_FAULT": "1:2:hang",
        "FAULT_TEST_TIMEOUT": str(TIMEOUT),
        "FAULT_TEST_NEW_GROUP": "1",
    }
    peer, hung = run_ranks("dist_fault", 2, tmp_path, timeout=120, env=env)
    for rank in (peer, hung):
        res = rank.result
        assert rank.returncode == 0, rank.stderr[-3000:]
        assert "error" not in res, res.get("traceback")
        assert res["done"] == [1] and res["failed"] == 2, res
        # The timeout is what ended the wait: not sooner, and not much later.
        assert TIMEOUT * 0.9 <= res["seconds"] < TIMEOUT * 4, res
        assert res["after"].startswith("DistBackendError") and "failed earlier" in res["after"]
        assert res["new_group"] == [3.0, 3.0]  # 1 + 2: the healthy group sums both ranks
        # As NCCL's timeout path: DistBackendError wherever the failure reaches the program: at
        # the stream that waited for the collective (here), at Work.wait() ...
        assert res["failure"].startswith("DistBackendError: "), res
        assert res["work_wait"].startswith("DistBackendError: vccl c10d::allreduce: "), res
        # ... and at torch.vdev.synchronize(), which finds the comm stream's failure.
        assert res["device_sync"].startswith("DistBackendError: [c10d::allreduce] vccl "), res
    # The peer: Gloo's timeout error, as a rank that never sends produces it.
    assert re.search(rf"Timed out waiting {TIMEOUT * 1000}ms", peer.result["failure"]), peer.result
    # The hanging rank's own collective fails as a timed-out one, naming the injection.
    assert (
        f"vccl c10d::allreduce: timed out after {TIMEOUT * 1000} ms: rank 1's collective 2 never "
        "arrived (injected by VDEV_DIST_FAULT=1:2:hang)" in hung.result["failure"]
    ), hung.result


SCRIPT = """
import datetime, os
import torch
import torch.distributed as dist

torch.vdev.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("vccl", timeout=datetime.timedelta(seconds=20))
x = torch.full((2,), float(dist.get_rank() + 1), device="vdev")
for _ in range(3):
    dist.all_reduce(x)
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
print(f"attempt {attempt} rank {dist.get_rank()} result {x.tolist()}", flush=True)
dist.destroy_process_group()
"""


def test_torchrun_restarts_the_job_after_an_abort_and_the_restart_runs_through(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = child_env()
    env.update(VDEV_DEVICE_COUNT="2", VDEV_DIST_FAULT="1:2:abort", OMP_NUM_THREADS="1")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node=2",
            "--max-restarts=1",
            "--monitor-interval=0.2",
            f"--master-port={free_port()}",
            str(script),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    # Attempt 0: rank 1 exits at its 2nd all_reduce (nobody finishes); attempt 1 runs through
    # (its vccl group reconnects: a store prefix of its own per attempt).
    assert "VDEV_DIST_FAULT=1:2:abort: rank 1 exits at its collective 2" in run.stderr
    # (The ranks share the stdout: their lines may interleave.)
    reports = re.findall(r"attempt \d+ rank \d+ result \[[^\]]*\]", run.stdout)
    assert sorted(reports) == [
        "attempt 1 rank 0 result [12.0, 12.0]",  # (1 + 2) * 2 * 2: three all_reduces of 2 ranks
        "attempt 1 rank 1 result [12.0, 12.0]",
    ], run.stdout + run.stderr[-3000:]


# ---- the variable's value ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("1:3:abort", (1, 3, "abort")),
        (" 0 : 1 : hang ", (0, 1, "hang")),
        ("7:100:hang", (7, 100, "hang")),
    ],
)
def test_parse_dist_fault_accepts(text, expected):
    assert rt.parse_dist_fault(text) == expected


@pytest.mark.parametrize(
    "text,needle",
    [
        ("1:0:abort", f"N '0' is not an integer in 1..{2**63 - 1}"),
        ("1:-2:abort", f"N '-2' is not an integer in 1..{2**63 - 1}"),
        ("x:1:abort", "the rank 'x' is not an integer in 0..2147483647"),
        ("-1:1:hang", "the rank '-1' is not an integer"),
        ("1:2:explode", "the mode 'explode' is neither abort nor hang"),
        ("1:2", "three parts separated by ':'"),
        ("abort", "three parts separated by ':'"),
    ],
)
def test_parse_dist_fault_rejects_naming_the_value_and_what_is_valid(text, needle):
    with pytest.raises(ValueError) as info:
        rt.parse_dist_fault(text)
    msg = str(info.value)
    assert f"VDEV_DIST_FAULT='{text}' is not valid: " in msg and needle in msg, msg
    assert "expected RANK:N:MODE" in msg


def test_a_malformed_variable_keeps_import_safe_and_fails_clearly_on_use():
    r = run_python(
        """
        import warnings
        import torch
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert torch.vdev.device_count() == 0
        try:
            torch.zeros(1, device="vdev")
        except RuntimeError as e:
            print("ERR", e)
        """,
        env={"VDEV_DIST_FAULT": "1:2:explode"},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ERR" in r.stdout and "VDEV_DIST_FAULT='1:2:explode' is not valid" in r.stdout


def test_a_rank_the_world_does_not_have_is_refused_when_the_group_is_made():
    r = run_python(
        f"""
        import torch
        import torch.distributed as dist
        try:
            dist.init_process_group("vccl", init_method="tcp://127.0.0.1:{free_port()}",
                                    rank=0, world_size=1)
        except ValueError as e:
            print("ValueError", e)
        """,
        env={"VDEV_DIST_FAULT": "3:1:abort"},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert (
        "VDEV_DIST_FAULT=3:1:abort names rank 3, which this job does not have: its world has 1 "
        "rank(s), 0..0" in r.stdout
    ), r.stdout + r.stderr
