"""Runs a scenario of rank_scenarios.py in `world_size` processes on this machine (loopback only)
and collects what each rank reports. Every run is bounded: ranks still running after `timeout`
are killed and the test fails, so a hang can never stall the suite."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from child_process import child_env

SCRIPT = Path(__file__).with_name("rank_scenarios.py")


@dataclass
class Rank:
    returncode: int
    stderr: str
    result: dict


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(
    scenario: str,
    world_size: int,
    tmp_path: Path,
    timeout: float = 180,
    env: dict[str, str] | None = None,
) -> list[Rank]:
    port = free_port()
    full_env = child_env()
    full_env.update(
        {
            # A device per rank: as NCCL, vccl refuses two ranks of a host on one device.
            "VDEV_DEVICE_COUNT": str(max(2, world_size)),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "WORLD_SIZE": str(world_size),
            "OMP_NUM_THREADS": "1",
        }
    )
    full_env.update(env or {})
    procs = []
    for rank in range(world_size):
        out = tmp_path / f"rank{rank}.json"
        procs.append(
            subprocess.Popen(
                [sys.executable, str(SCRIPT), scenario, str(rank), str(out)],
                env={**full_env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    deadline = time.monotonic() + timeout
    ranks = []
    for rank, p in enumerate(procs):
        try:
            _, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError(
                f"{scenario}: rank {rank} still running after {timeout} s"
            ) from None
        out = tmp_path / f"rank{rank}.json"
        result = json.loads(out.read_text()) if out.exists() else {}
        ranks.append(Rank(p.returncode, err, result))
    return ranks
