"""What one rank of a multi-process test runs: `python rank_scenarios.py SCENARIO RANK OUT`.

The environment gives MASTER_ADDR/MASTER_PORT/WORLD_SIZE (tests/distributed/ranks.py). Each
scenario returns a JSON-able dict of what this rank observed; the test computes the expected
values itself. An exception escaping a scenario is recorded as "error" with its type."""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist


def _device(rank: int) -> torch.device:
    return torch.device("vdev", rank % torch.vdev.device_count())


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def collectives(rank: int, ws: int) -> dict:
    dev = _device(rank)
    torch.vdev.set_device(dev)
    dist.init_process_group(rank=rank, world_size=ws)  # no backend named: vdev's default
    out: dict = {"backend": dist.get_backend_config(), "device": str(dev)}

    def full(n, v, dtype=torch.float32):
        return torch.full((n,), v, dtype=dtype, device=dev)

    for name in ("SUM", "AVG", "PRODUCT", "MIN", "MAX"):
        x = full(3, float(rank + 1))
        dist.all_reduce(x, op=getattr(dist.ReduceOp, name))
        out[f"all_reduce_{name}"] = x.tolist()
    for name in ("BAND", "BOR", "BXOR"):
        x = full(3, rank + 1, torch.int32)
        dist.all_reduce(x, op=getattr(dist.ReduceOp, name))
        out[f"all_reduce_{name}"] = x.tolist()
    for dtype in (torch.bfloat16, torch.int64, torch.complex64, torch.float64):
        x = full(2, rank + 1, dtype)
        dist.all_reduce(x)
        out[f"all_reduce_{dtype}"] = x.cpu().to(torch.complex128).real.tolist()

    x = full(3, float(rank))
    dist.broadcast(x, src=ws - 1)
    out["broadcast"] = x.tolist()
    x = full(3, float(rank + 1))
    dist.reduce(x, dst=0)
    out["reduce"] = x.tolist() if rank == 0 else None

    outs = [full(2, -1.0) for _ in range(ws)]
    dist.all_gather(outs, full(2, float(rank)))
    out["all_gather"] = [t.tolist() for t in outs]
    o = full(2 * ws, -1.0)
    dist.all_gather_into_tensor(o, full(2, float(rank)))
    out["all_gather_into_tensor"] = o.tolist()
    # NCCL needs only matching element counts (Gloo alone would also check the shapes).
    o = torch.full((2, 2 * ws), -1.0, device=dev)
    dist.all_gather_into_tensor(o, torch.full((2, 2), float(rank), device=dev))
    out["all_gather_into_tensor_2d"] = o.flatten().tolist()
    g = [full(2, -1.0) for _ in range(ws)] if rank == 0 else None
    dist.gather(full(2, float(rank)), g, dst=0)
    out["gather"] = [t.tolist() for t in g] if rank == 0 else None
    o = full(2, -1.0)
    dist.scatter(o, [full(2, float(10 + r)) for r in range(ws)] if rank == 0 else None, src=0)
    out["scatter"] = o.tolist()
    o = full(2, -1.0)
    dist.reduce_scatter(o, [full(2, float(rank * 10 + r)) for r in range(ws)])
    out["reduce_scatter"] = o.tolist()
    o = full(2, -1.0)
    dist.reduce_scatter_tensor(o, torch.arange(2.0 * ws, device=dev) + rank)
    out["reduce_scatter_tensor"] = o.tolist()
    outs = [full(1, -1.0) for _ in range(ws)]
    dist.all_to_all(outs, [full(1, float(100 * rank + r)) for r in range(ws)])
    out["all_to_all"] = [t.tolist() for t in outs]
    # Uneven splits: rank r sends r + 1 + j elements to rank j.
    send = torch.cat([full(rank + 1 + j, float(100 * rank + j)) for j in range(ws)])
    recv = full(sum(j + 1 + rank for j in range(ws)), -1.0)
    dist.all_to_all_single(
        recv, send, [j + 1 + rank for j in range(ws)], [rank + 1 + j for j in range(ws)]
    )
    out["all_to_all_single"] = recv.tolist()

    # Point to point around the ring; even ranks send first so blocking calls pair up.
    nxt, prv = (rank + 1) % ws, (rank - 1) % ws
    s, r = full(4, float(rank)), full(4, -1.0)
    if rank % 2 == 0:
        dist.send(s, nxt)
        dist.recv(r, prv)
    else:
        dist.recv(r, prv)
        dist.send(s, nxt)
    out["send_recv"] = r.tolist()
    r = full(4, -1.0)
    works = [dist.isend(full(4, float(rank + 50)), nxt), dist.irecv(r, prv)]
    for w in works:
        w.wait()
    out["isend_irecv"] = r.tolist()
    n = 1 << 20  # larger than the socket buffers: both sides must be posted together
    r = full(n, -1.0)
    ops = [dist.P2POp(dist.isend, full(n, float(rank)), nxt), dist.P2POp(dist.irecv, r, prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    out["batch_isend_irecv"] = [r[0].item(), r[-1].item(), bool((r == prv).all())]

    dist.barrier()
    objs = [None] * ws
    dist.all_gather_object(objs, {"rank": rank})
    out["all_gather_object"] = objs
    lst = [f"from {rank}"]
    dist.broadcast_object_list(lst, src=0)
    out["broadcast_object_list"] = lst
    got = [None]
    dist.scatter_object_list(got, [f"to {r}" for r in range(ws)] if rank == 0 else None, src=0)
    out["scatter_object_list"] = got

    # Groups: all ranks in reverse order, and the last rank alone.
    everyone = dist.new_group(list(range(ws))[::-1])
    x = full(2, float(rank + 1))
    dist.all_reduce(x, group=everyone)
    out["new_group_all_reduce"] = x.tolist()
    alone = dist.new_group([ws - 1])
    if rank == ws - 1:
        x = full(2, 7.0)
        dist.all_reduce(x, group=alone)
        out["single_rank_group"] = x.tolist()
    sub, _ = dist.new_subgroups(group_size=1)
    x = full(2, float(rank + 3))
    dist.all_reduce(x, group=sub)
    out["subgroup"] = x.tolist()

    a, b = full(3, float(rank + 1)), full(5, float(10 * (rank + 1)))
    with dist._coalescing_manager(device=dev, async_ops=True) as cm:
        dist.all_reduce(a)
        dist.all_reduce(b)
    cm.wait()
    out["coalesced_all_reduce"] = [a.tolist(), b.tolist()]

    w = dist.all_reduce(full(2, 1.0), async_op=True)
    fut = w.get_future()
    w.wait()
    out["future_value"] = fut.wait()[0].tolist()
    torch.vdev.synchronize()
    out["async_completed_after_sync"] = w.is_completed() and w.is_success()

    # The profiler's device timeline (issue 33): the collective on vccl's communication stream,
    # with the bytes it moves, linked to the host call.
    from torch.profiler import ProfilerActivity, profile

    x = full(1000, 1.0)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        dist.all_reduce(x)
        torch.vdev.synchronize()
    import json
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        prof.export_chrome_trace(f"{d}/trace.json")
        with open(f"{d}/trace.json") as f:
            events = json.load(f)["traceEvents"]
    out["profiled_collectives"] = [
        {"name": e["name"], "bytes": e["args"].get("bytes"), "stream": e["tid"], "pid": e["pid"]}
        for e in events
        if e.get("ph") == "X" and e["name"].startswith("vccl:")
    ]
    rows = {r.key: r for r in prof.key_averages()}
    out["profiled_device_time_us"] = max(
        (r.device_time_total for k, r in rows.items() if k.startswith("c10d::allreduce")), default=0
    )
    dist.destroy_process_group()
    return out


def _mlp_batches(rank: int, steps: int) -> list:
    """The batches rank `rank` trains on (the test rebuilds them for its CPU reference)."""
    g = torch.Generator().manual_seed(1 + rank)
    return [(torch.randn(5, 8, generator=g), torch.randn(5, 4, generator=g)) for _ in range(steps)]


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def sharded(rank: int, ws: int) -> dict:
    """FSDP2 on a DeviceMesh of vdev: trains, saves its sharded state dict with
    torch.distributed.checkpoint and loads it into a fresh model; DTensor basics."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    dev = _device(rank)
    torch.vdev.set_device(dev)
    mesh = init_device_mesh("vdev", (ws,))
    out: dict = {"mesh_device": mesh.device_type, "backend": dist.get_backend_config()}

    def sharded_mlp() -> torch.nn.Module:
        m = _mlp().to(dev)
        for layer in m:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        return fully_shard(m, mesh=mesh)

    model = sharded_mlp()
    out["param_types"] = sorted({type(p).__name__ for p in model.parameters()})
    out["local_devices"] = sorted({str(p.to_local().device) for p in model.parameters()})
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in _mlp_batches(rank, 3):
        loss = ((model(x.to(dev)) - y.to(dev)) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    out["trained"] = [p.full_tensor().cpu().flatten().tolist() for p in model.parameters()]

    path = os.environ["VDEV_TEST_CHECKPOINT"]
    dcp.save({"model": model.state_dict()}, checkpoint_id=path)
    fresh = sharded_mlp()
    state = {"model": fresh.state_dict()}
    dcp.load(state, checkpoint_id=path)
    fresh.load_state_dict(state["model"])
    out["loaded"] = [p.full_tensor().cpu().flatten().tolist() for p in fresh.parameters()]

    t = torch.arange(24.0).reshape(6, 4)
    d = distribute_tensor(t.to(dev), mesh, [Shard(0)])
    out["shard0_local"] = d.to_local().cpu().tolist()
    out["replicate"] = d.redistribute(mesh, [Replicate()]).to_local().cpu().tolist()
    s1 = d.redistribute(mesh, [Shard(1)])
    out["shard1_local"] = s1.to_local().cpu().tolist()
    out["shard1_full"] = s1.full_tensor().cpu().tolist()
    partial = DTensor.from_local(torch.full((2, 2), rank + 1.0, device=dev), mesh, [Partial()])
    out["partial_full"] = partial.full_tensor().cpu().tolist()
    out["uneven_full"] = (
        distribute_tensor(torch.arange(7.0, device=dev), mesh, [Shard(0)]).full_tensor().tolist()
    )
    dist.destroy_process_group()
    return out


DDP_TIMES = (
    "forward_compute_time",
    "backward_compute_time",
    "backward_comm_time",
    "backward_compute_comm_overlap_time",
)


def ddp_default_backend(rank: int, ws: int) -> dict:
    """The CUDA recipe with only the device changed: init_process_group with neither backend nor
    device_id (env init), then DistributedDataParallel with device_ids, on the default group and
    on a subgroup made with no backend either. Then a few iterations, plain and with a static
    graph, reading DDP's logging data after each (its runtime stats: the reducer timer)."""
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group(rank=rank, world_size=ws)
    dev = torch.device("vdev", rank)
    out: dict = {"backend": dist.get_backend_config()}
    for name, group in (("world", None), ("subgroup", dist.new_group(list(range(ws))))):
        model = DistributedDataParallel(_mlp().to(dev), device_ids=[rank], process_group=group)
        x, y = _mlp_batches(rank, 1)[0]
        ((model(x.to(dev)) - y.to(dev)) ** 2).mean().backward()
        out[name] = [p.grad.cpu().flatten().tolist() for p in model.parameters()]
    for static in (False, True):
        model = DistributedDataParallel(_mlp().to(dev), device_ids=[rank], static_graph=static)
        stats = []
        for x, y in _mlp_batches(rank, 4):
            ((model(x.to(dev)) - y.to(dev)) ** 2).mean().backward()
            data = model._get_ddp_logging_data()
            stats.append({key: data.get(key) for key in (*DDP_TIMES, "iteration")})
        out["static_graph" if static else "dynamic_graph"] = stats
    dist.destroy_process_group()
    return out


def _failing_all_reduce(x: torch.Tensor) -> dict:
    """All-reduces `x` and reads it back; returns the error raised (or None) and the seconds."""
    start = time.monotonic()
    try:
        dist.all_reduce(x)
        x.cpu()
        error = None
    except Exception as e:  # noqa: BLE001
        error = _error(e)
    return {"error": error, "seconds": time.monotonic() - start}


def mismatch(rank: int, ws: int) -> dict:
    """Ranks disagree on the size of an all_reduce: the error must come within the timeout."""
    dev = _device(rank)
    torch.vdev.set_device(dev)
    dist.init_process_group(
        "vccl", rank=rank, world_size=ws, timeout=datetime.timedelta(seconds=10)
    )
    kept = torch.arange(5.0, device=dev)
    out = _failing_all_reduce(torch.ones(4 + 4 * rank, device=dev))
    # The group is broken for good (as an NCCL communicator after an error), on every rank ...
    try:
        dist.all_reduce(torch.ones(2, device=dev))
        out["after"] = None
    except Exception as e:  # noqa: BLE001
        out["after"] = _error(e)
    # ... and a new group works.
    fresh = dist.new_group(list(range(ws)))
    x = torch.ones(2, device=dev)
    dist.all_reduce(x, group=fresh)
    out["new_group"] = x.tolist()
    out["kept"] = kept.tolist()
    out["device_works"] = (torch.ones(3, device=dev) * 2).tolist()
    return out


def _outcome(call) -> str | None:
    """Runs `call` and synchronizes the device; the error raised (or None)."""
    try:
        call()
        torch.vdev.synchronize()
    except Exception as e:  # noqa: BLE001
        return _error(e)
    return None


def mismatched_arguments(rank: int, ws: int) -> dict:
    """Ranks agree on the collective and its tensors but not on its reduce op, then its root."""
    dev = _device(rank)
    torch.vdev.set_device(dev)
    dist.init_process_group(
        "vccl", rank=rank, world_size=ws, timeout=datetime.timedelta(seconds=10)
    )
    x = torch.full((4,), float(rank + 1), device=dev)
    op = dist.ReduceOp.SUM if rank == 0 else dist.ReduceOp.MAX
    out: dict = {"reduce_op": _outcome(lambda: dist.all_reduce(x, op=op))}
    out["reduce_op_result"] = x.tolist()
    # Each rank names itself as the root: a broadcast with no agreed source.
    fresh = dist.new_group(list(range(ws)))
    y = torch.full((4,), float(rank), device=dev)
    out["root"] = _outcome(lambda: dist.broadcast(y, src=rank, group=fresh))
    return out


def bad_calls(rank: int, ws: int) -> dict:
    """Calls whose arguments are wrong raise at the call on the rank that made them, and the
    group goes on working; calls that NCCL runs and Gloo alone would not, compute as NCCL does."""
    dev = _device(rank)
    torch.vdev.set_device(dev)
    dist.init_process_group(
        "vccl", rank=rank, world_size=ws, timeout=datetime.timedelta(seconds=10)
    )
    out: dict = {}

    def at_call(name, call):
        try:
            call()
            out[name] = None
        except Exception as e:  # noqa: BLE001
            out[name] = _error(e)
        torch.vdev.synchronize()  # nothing was queued: nothing fails later either

    x = torch.ones(4, device=dev)
    at_call("broadcast_src", lambda: dist.broadcast(x, src=ws + 3))
    f8 = torch.ones(4).to(torch.float8_e4m3fn).to(dev)
    at_call("float8_all_reduce", lambda: dist.all_reduce(f8))
    at_call("bool_avg", lambda: dist.all_reduce(x.bool(), op=dist.ReduceOp.AVG))
    at_call("float_band", lambda: dist.all_reduce(x, op=dist.ReduceOp.BAND))
    at_call("int16", lambda: dist.all_reduce(x.short()))
    at_call("send_peer", lambda: dist.send(x, dst=ws + 3))
    at_call("send_tag", lambda: dist.isend(x, dst=(rank + 1) % ws, tag=-1))
    # NCCL's semantics: an integer AVG is the sum divided by the group's size, rounded toward zero;
    # a bool SUM is a logical or; float8 tensors move as bytes.
    i = torch.tensor([rank + 1, -(rank + 1) * 3, 7 * rank], device=dev)
    dist.all_reduce(i, op=dist.ReduceOp.AVG)
    out["int_avg"] = i.tolist()
    b = torch.tensor([rank == 0, True, False], device=dev)
    dist.all_reduce(b)
    out["bool_sum"] = b.tolist()
    f8 = torch.full((4,), 1.5 + rank).to(torch.float8_e4m3fn).to(dev)
    dist.broadcast(f8, src=ws - 1)
    out["float8_broadcast"] = f8.float().tolist()
    y = torch.full((2,), float(rank + 1), device=dev)
    dist.all_reduce(y)
    out["after"] = y.tolist()
    return out


def same_device(rank: int, ws: int) -> dict:
    """Every rank on vdev:0 (a program that forgot set_device(local_rank)): NCCL refuses."""
    torch.vdev.set_device(0)
    dist.init_process_group(
        "vccl", rank=rank, world_size=ws, timeout=datetime.timedelta(seconds=10)
    )
    x = torch.ones(4, device="vdev:0")
    out: dict = {"first": _outcome(lambda: dist.all_reduce(x))}
    out["again"] = _outcome(lambda: dist.all_reduce(x))
    out["x"] = x.tolist()  # nothing was queued
    return out


def rank_dies(rank: int, ws: int) -> dict:
    """The last rank exits after the group is up: the others fail within the timeout."""
    dev = _device(rank)
    torch.vdev.set_device(dev)
    dist.init_process_group(
        "vccl", rank=rank, world_size=ws, timeout=datetime.timedelta(seconds=10)
    )
    dist.barrier()
    if rank == ws - 1:
        os._exit(3)
    kept = torch.arange(5.0, device=dev)
    out = _failing_all_reduce(torch.ones(4, device=dev))
    out["kept"] = kept.tolist()
    out["device_works"] = (torch.ones(3, device=dev) * 2).tolist()
    return out


def dist_fault(rank: int, ws: int) -> dict:
    """Under VDEV_DIST_FAULT (set by the test): all-reduces until one fails, recording which and
    how long it took; then, with FAULT_TEST_NEW_GROUP=1 (every rank is still alive), makes a new
    group, which works."""
    dev = _device(rank)
    torch.vdev.set_device(dev)
    timeout = float(os.environ["FAULT_TEST_TIMEOUT"])
    dist.init_process_group(
        "vccl", rank=rank, world_size=ws, timeout=datetime.timedelta(seconds=timeout)
    )
    out: dict = {"done": []}
    x = torch.ones(4, device=dev)
    for i in range(1, 5):
        start = time.monotonic()
        work = None
        try:
            # Work.wait() makes the current stream wait for the collective; reading x then
            # synchronizes: the failure reaches the host through the stream's event wait.
            work = dist.all_reduce(x, async_op=True)
            work.wait()
            x.cpu()
            error = None
        except Exception as e:  # noqa: BLE001
            error = _error(e)
        if error is None:
            out["done"].append(i)
            continue
        out.update(failed=i, failure=error, seconds=time.monotonic() - start)
        # The failed collective's Work raises the same failure when waited on again.
        out["work_wait"] = _outcome(work.wait) if work is not None else "no work"
        # The device's synchronize (the comm stream's error, on this thread).
        out["device_sync"] = _outcome(lambda: None)
        out["after"] = _outcome(lambda: dist.all_reduce(x))  # the group is broken for good
        if os.environ.get("FAULT_TEST_NEW_GROUP") != "1":
            break
        fresh = dist.new_group(list(range(ws)))
        y = torch.full((2,), float(rank + 1), device=dev)
        dist.all_reduce(y, group=fresh)
        out["new_group"] = y.tolist()
        break
    return out


def main() -> None:
    scenario, rank, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    ws = int(os.environ["WORLD_SIZE"])
    try:
        result = globals()[scenario](rank, ws)
    except BaseException as e:  # noqa: BLE001
        result = {"error": _error(e), "traceback": traceback.format_exc()}
    with open(path, "w") as f:
        json.dump(result, f)
    # Exit without running destructors of a broken group (a dead peer): the result is written.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
