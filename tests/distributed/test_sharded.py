"""FSDP2 and DTensor on a DeviceMesh of vdev, across processes (rank_scenarios.sharded).

FSDP2 averages gradients over the ranks, so after training each rank on its own batches the
weights must be those of one CPU process trained on the ranks' batches together (equal batch
sizes: the mean of the ranks' mean losses is the mean loss of the concatenated batch). The
sharded state dict saved with torch.distributed.checkpoint must load back into a fresh model."""

from __future__ import annotations

import os

import pytest
import torch

from rank_scenarios import _mlp, _mlp_batches
from ranks import run_ranks

SIZES = [2, 4] if os.environ.get("VDEV_DIST_FULL") == "1" else [2]


def _reference(ws: int) -> list[list[float]]:
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    per_rank = [_mlp_batches(r, 3) for r in range(ws)]
    for step in range(3):
        x = torch.cat([per_rank[r][step][0] for r in range(ws)])
        y = torch.cat([per_rank[r][step][1] for r in range(ws)])
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
        opt.zero_grad()
    return [p.detach().flatten().tolist() for p in model.parameters()]


def _shard(t: torch.Tensor, dim: int, ws: int, rank: int) -> list:
    """Shard(dim)'s local part, by its documented rule: torch.chunk, empty past the last chunk."""
    chunks = torch.chunk(t, ws, dim)
    if rank < len(chunks):
        return chunks[rank].tolist()
    return t.narrow(dim, 0, 0).tolist()


@pytest.mark.parametrize("ws", SIZES)
def test_fsdp2_and_dtensor_on_a_vdev_mesh(ws, tmp_path):
    # init_device_mesh sets the device from LOCAL_RANK: one device per rank, as on a GPU host.
    env = {"VDEV_TEST_CHECKPOINT": str(tmp_path / "checkpoint"), "VDEV_DEVICE_COUNT": str(ws)}
    results = run_ranks("sharded", ws, tmp_path, env=env)
    expected = _reference(ws)
    t = torch.arange(24.0).reshape(6, 4)
    for rank, r in enumerate(results):
        assert r.returncode == 0, r.stderr[-3000:]
        res = r.result
        assert "error" not in res, res.get("traceback")
        assert res["mesh_device"] == "vdev"
        assert "vccl" in res["backend"]
        assert res["param_types"] == ["DTensor"]
        assert res["local_devices"] == [f"vdev:{rank}"]
        for got, want in zip(res["trained"], expected, strict=True):
            torch.testing.assert_close(torch.tensor(got), torch.tensor(want))
        assert res["loaded"] == res["trained"]
        assert res["shard0_local"] == _shard(t, 0, ws, rank)
        assert res["replicate"] == t.tolist()
        assert res["shard1_local"] == _shard(t, 1, ws, rank)
        assert res["shard1_full"] == t.tolist()
        assert res["partial_full"] == [[ws * (ws + 1) / 2] * 2] * 2
        assert res["uneven_full"] == list(range(7))
