"""examples/ddp_torchrun.py under torchrun: DistributedDataParallel on vdev with vccl trains to
the weights one CPU process reaches on the whole batch (2 ranks; 4 with VDEV_DIST_FULL=1)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from child_process import child_env
from ranks import free_port

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ddp_torchrun.py"
SIZES = [2, 4] if os.environ.get("VDEV_DIST_FULL") == "1" else [2]


def load_example():
    spec = importlib.util.spec_from_file_location("ddp_torchrun", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("nproc", SIZES)
def test_ddp_matches_one_process_on_the_whole_batch(nproc, tmp_path):
    steps = 4
    saved = tmp_path / "weights.pt"
    env = child_env()
    env["VDEV_DEVICE_COUNT"] = str(max(2, nproc))  # a device per rank, as NCCL needs
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nproc-per-node={nproc}",
            f"--master-port={free_port()}",
            str(EXAMPLE),
            "--steps",
            str(steps),
            "--save",
            str(saved),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"on {nproc} ranks (vdev:vccl)" in run.stdout

    example = load_example()
    reference = example.make_model()
    example.train(reference, example.make_data(steps), torch.device("cpu"))
    trained = torch.load(saved)
    for name, value in reference.state_dict().items():
        torch.testing.assert_close(trained[name], value, rtol=1e-5, atol=1e-6)
