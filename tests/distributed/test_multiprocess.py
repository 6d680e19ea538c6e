"""vccl across processes (loopback, Gloo's TCP transport): every collective and point-to-point
call, groups, object collectives, and failures that must raise on every rank within the timeout.

Expected values are computed here from each rank's inputs (rank_scenarios.py says what each rank
sends). Two processes in CI; VDEV_DIST_FULL=1 also runs four."""

from __future__ import annotations

import os
from functools import reduce

import pytest

from rank_scenarios import DDP_TIMES, _mlp, _mlp_batches
from ranks import run_ranks

SIZES = [2, 4] if os.environ.get("VDEV_DIST_FULL") == "1" else [2]


@pytest.fixture(scope="module", params=SIZES, ids=lambda n: f"{n}ranks")
def ranks(request, tmp_path_factory):
    ws = request.param
    results = run_ranks("collectives", ws, tmp_path_factory.mktemp(f"collectives{ws}"))
    for r, rank in enumerate(results):
        assert rank.returncode == 0, rank.stderr[-3000:]
        assert "error" not in rank.result, (r, rank.result.get("traceback"))
    return [rank.result for rank in results]


def test_default_backend_of_vdev_is_vccl(ranks):
    for res in ranks:
        assert res["backend"] == "vdev:vccl"
        assert res["device"].startswith("vdev:")


@pytest.mark.parametrize(
    "op,fn",
    [
        ("SUM", sum),
        ("AVG", lambda v: sum(v) / len(v)),
        ("PRODUCT", lambda v: reduce(lambda a, b: a * b, v)),
        ("MIN", min),
        ("MAX", max),
        ("BAND", lambda v: reduce(lambda a, b: a & b, v)),
        ("BOR", lambda v: reduce(lambda a, b: a | b, v)),
        ("BXOR", lambda v: reduce(lambda a, b: a ^ b, v)),
    ],
)
def test_all_reduce_ops(ranks, op, fn):
    ws = len(ranks)
    expected = fn([r + 1 for r in range(ws)])
    for res in ranks:
        assert res[f"all_reduce_{op}"] == pytest.approx([expected] * 3)


@pytest.mark.parametrize("dtype", ["bfloat16", "int64", "complex64", "float64"])
def test_all_reduce_dtypes(ranks, dtype):
    ws = len(ranks)
    for res in ranks:
        assert res[f"all_reduce_torch.{dtype}"] == [ws * (ws + 1) / 2] * 2


def test_rooted_collectives(ranks):
    ws = len(ranks)
    for r, res in enumerate(ranks):
        assert res["broadcast"] == [ws - 1.0] * 3
        assert res["reduce"] == ([ws * (ws + 1) / 2] * 3 if r == 0 else None)
        assert res["gather"] == ([[float(i)] * 2 for i in range(ws)] if r == 0 else None)
        assert res["scatter"] == [10.0 + r] * 2


def test_gathers_and_scatters(ranks):
    ws = len(ranks)
    for r, res in enumerate(ranks):
        assert res["all_gather"] == [[float(i)] * 2 for i in range(ws)]
        assert res["all_gather_into_tensor"] == [float(i) for i in range(ws) for _ in range(2)]
        assert res["all_gather_into_tensor_2d"] == [float(i) for i in range(ws) for _ in range(4)]
        # rank i contributes i*10 + r to the slot of rank r
        assert res["reduce_scatter"] == [float(sum(i * 10 + r for i in range(ws)))] * 2
        # rank i contributes arange(2*ws) + i; rank r gets elements 2r, 2r+1 summed
        assert res["reduce_scatter_tensor"] == [
            float(sum(2 * r + k + i for i in range(ws))) for k in range(2)
        ]


def test_all_to_all(ranks):
    ws = len(ranks)
    for r, res in enumerate(ranks):
        assert res["all_to_all"] == [[100.0 * j + r] for j in range(ws)]
        # rank j sends j + 1 + r elements of value 100*j + r to rank r
        assert res["all_to_all_single"] == [
            100.0 * j + r for j in range(ws) for _ in range(j + 1 + r)
        ]


def test_point_to_point(ranks):
    ws = len(ranks)
    for r, res in enumerate(ranks):
        prv = (r - 1) % ws
        assert res["send_recv"] == [float(prv)] * 4
        assert res["isend_irecv"] == [prv + 50.0] * 4
        assert res["batch_isend_irecv"] == [float(prv), float(prv), True]


def test_object_collectives(ranks):
    ws = len(ranks)
    for r, res in enumerate(ranks):
        assert res["all_gather_object"] == [{"rank": i} for i in range(ws)]
        assert res["broadcast_object_list"] == ["from 0"]
        assert res["scatter_object_list"] == [f"to {r}"]


def test_groups(ranks):
    ws = len(ranks)
    for r, res in enumerate(ranks):
        assert res["new_group_all_reduce"] == [ws * (ws + 1) / 2] * 2
        assert res["subgroup"] == [r + 3.0] * 2  # a group of one
        if r == ws - 1:
            assert res["single_rank_group"] == [7.0] * 2


def test_coalesced_all_reduce(ranks):
    total = sum(r + 1 for r in range(len(ranks)))
    for res in ranks:
        assert res["coalesced_all_reduce"] == [[float(total)] * 3, [10.0 * total] * 5]


def test_async_work_and_future(ranks):
    ws = len(ranks)
    for res in ranks:
        assert res["future_value"] == [float(ws)] * 2
        assert res["async_completed_after_sync"] is True


@pytest.mark.parametrize("scenario", ["mismatch", "rank_dies"])
def test_failures_raise_on_the_other_ranks_within_the_timeout(scenario, tmp_path):
    results = run_ranks(scenario, 2, tmp_path, timeout=120)
    survivors = results if scenario == "mismatch" else results[:1]
    if scenario == "rank_dies":
        assert results[1].returncode == 3
    for rank in survivors:
        res = rank.result
        assert rank.returncode == 0, rank.stderr[-3000:]
        # NCCL's watchdog raises a failed or timed-out collective as DistBackendError.
        assert res["error"] and res["error"].startswith("DistBackendError"), res
        if scenario == "mismatch":
            assert "called different collectives" in res["error"]
            assert "4 element(s)" in res["error"] and "8 element(s)" in res["error"]
            # every rank refuses the group's next collective at the call, naming the failure
            assert res["after"].startswith("DistBackendError"), res["after"]
            assert "failed earlier" in res["after"] and "different collectives" in res["after"]
            assert res["new_group"] == [2.0, 2.0]
        else:
            assert "c10d::allreduce" in res["error"]
        assert res["seconds"] < 30  # the group's timeout is 10 s: it must not be exceeded much
        assert res["kept"] == [0.0, 1.0, 2.0, 3.0, 4.0]
        assert res["device_works"] == [2.0, 2.0, 2.0]


def test_ranks_that_pass_different_reduce_ops_or_roots_raise_on_every_rank(tmp_path):
    results = run_ranks("mismatched_arguments", 2, tmp_path, timeout=120)
    for r, rank in enumerate(results):
        res = rank.result
        assert rank.returncode == 0, rank.stderr[-3000:]
        assert "error" not in res, res.get("traceback")
        # No half-SUM, half-MAX result: the collective raises before any data moves.
        err = res["reduce_op"]
        assert err and err.startswith("DistBackendError"), err
        assert "called different collectives" in err
        assert "with ReduceOp.SUM" in err and "with ReduceOp.MAX" in err, err
        assert res["reduce_op_result"] == [r + 1.0] * 4
        err = res["root"]
        assert err and "called different collectives" in err, err
        assert "rooted at rank 0" in err and "rooted at rank 1" in err, err


def test_bad_arguments_raise_at_the_call_and_the_group_keeps_working(tmp_path):
    results = run_ranks("bad_calls", 2, tmp_path, timeout=120)
    ws = len(results)
    for rank in results:
        res = rank.result
        assert rank.returncode == 0, rank.stderr[-3000:]
        assert "error" not in res, res.get("traceback")
        # NCCL: ncclInvalidArgument ("invalid root"), which torch raises as DistBackendError.
        assert res["broadcast_src"].startswith("DistBackendError"), res
        assert "invalid root rank: 5 (root should be in the 0..1 range)" in res["broadcast_src"]
        assert res["float8_all_reduce"].startswith("RuntimeError"), res
        assert "Unsupported Float8 type for vccl reduction" in res["float8_all_reduce"]
        assert res["bool_avg"].startswith("TypeError"), res
        assert "Cannot use ReduceOp.AVG with boolean inputs" in res["bool_avg"]
        assert res["float_band"].startswith("RuntimeError"), res
        assert "Cannot use ReduceOp.BAND with non-integral dtype" in res["float_band"]
        assert res["int16"].startswith("TypeError"), res
        assert "not supported for vccl process group: Short" in res["int16"]
        assert res["send_peer"].startswith("ValueError"), res
        assert "invalid peer rank: 5" in res["send_peer"]
        assert res["send_tag"].startswith("RuntimeError"), res
        assert "Tag must be nonnegative" in res["send_tag"]
        # rank r contributes [r + 1, -3 (r + 1), 7 r]
        sums = [ws * (ws + 1) // 2, -3 * ws * (ws + 1) // 2, 7 * ws * (ws - 1) // 2]
        assert res["int_avg"] == [int(v / ws) for v in sums]  # rounded toward zero
        assert res["bool_sum"] == [True, True, False]
        assert res["float8_broadcast"] == [1.5 + ws - 1] * 4
        assert res["after"] == [float(sum(range(1, ws + 1)))] * 2


def test_ddp_with_no_backend_and_no_device_id_as_on_cuda(tmp_path):
    """init_process_group(rank=, world_size=) then DDP(device_ids=[rank]): CUDA's recipe works on
    vdev (torch picks the accelerator's backend, vccl, and makes it the group's default)."""
    results = run_ranks("ddp_default_backend", 2, tmp_path, timeout=120)
    ws = len(results)
    grads = []
    for r in range(ws):  # DDP averages the ranks' gradients
        model = _mlp()
        x, y = _mlp_batches(r, 1)[0]
        ((model(x) - y) ** 2).mean().backward()
        grads.append([p.grad.flatten() for p in model.parameters()])
    expected = [(sum(g[i] for g in grads) / ws).tolist() for i in range(len(grads[0]))]
    for rank in results:
        res = rank.result
        assert rank.returncode == 0, rank.stderr[-3000:]
        assert "error" not in res, res.get("traceback")
        assert res["backend"] == "vdev:vccl"
        for name in ("world", "subgroup"):
            for got, want in zip(res[name], expected, strict=True):
                assert got == pytest.approx(want, rel=1e-5, abs=1e-6), name
        check_ddp_runtime_stats(res, rank.stderr)


def check_ddp_runtime_stats(res: dict, stderr: str) -> None:
    """DDP's logging data after each of 4 iterations (rank_scenarios.ddp_default_backend), as
    torch's own DDP logging test checks CUDA's (the forward of iteration k + 1 measures k): the
    reducer timer registered for vdev, not the warning DDP prints without one."""
    assert "Time stats are currently only collected" not in stderr
    for graph in ("dynamic_graph", "static_graph"):
        for idx, times in enumerate(res[graph]):
            if idx == 0:
                continue  # nothing measured yet
            assert times["iteration"] == idx, (graph, times)
            fwd, bwd, comm, overlap = (times[key] for key in DDP_TIMES)
            assert fwd > 0 and bwd > 0 and comm > 0, (graph, times)
            # Measured on one stream: the backward's all-reduce starts within the backward and
            # ends after it.
            assert bwd >= overlap and comm >= overlap, (graph, times)
            if graph == "static_graph" and idx == 1:
                # A static graph's first iteration all-reduces after its backward: DDP records
                # the backward's end, then the all-reduce's start (Reducer::delay_all_reduce). An
                # end before its start measures nothing.
                assert overlap == 0, times
            else:
                assert overlap > 0, (graph, times)


def test_two_ranks_on_one_device_raise_as_nccl_does(tmp_path):
    results = run_ranks("same_device", 2, tmp_path, timeout=120)
    for r, rank in enumerate(results):
        res = rank.result
        assert rank.returncode == 0, rank.stderr[-3000:]
        assert "error" not in res, res.get("traceback")
        for key in ("first", "again"):
            err = res[key]
            assert err and err.startswith("DistBackendError"), err
            assert (
                f"Duplicate GPU detected : rank {r} and rank {1 - r} both on vdev device 0" in err
            )
        assert res["x"] == [1.0] * 4


def test_a_profiled_collective_is_a_device_activity_on_the_comm_stream(ranks):
    """torch.profiler (issue 33): the all_reduce is a device activity on vccl's communication
    stream (not the default stream), with the bytes it moves, and its time is the host call's."""
    for rank, r in enumerate(ranks):
        (c,) = r["profiled_collectives"]
        assert c["bytes"] == 1000 * 4
        assert c["stream"] != 0 and c["pid"] == rank
        assert r["profiled_device_time_us"] > 0
