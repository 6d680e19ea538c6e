"""Producer/consumer scenarios of vdev tensors shared through torch.multiprocessing (spawn):
`python sharing_scenarios.py SCENARIO` prints one JSON line of what both sides observed; the test
(test_sharing.py) computes the expected values itself. Every wait is bounded (a broken runtime
fails the scenario instead of hanging it); the consumer is a spawned child of this script, which
is why its functions live in a file (the child imports it to find them)."""

from __future__ import annotations

import gc
import json
import os
import sys
import traceback

import torch
import torch.multiprocessing as mp

from torch_vdev import _testing as rt

WAIT = 60  # seconds: a bound on every wait, not a timing assertion


def _describe(t: torch.Tensor) -> dict:
    return {
        "device": str(t.device),
        "dtype": str(t.dtype),
        "values": t.cpu().tolist(),
        "stride": list(t.stride()),
        "offset": t.storage_offset(),
        "type": type(t).__name__,
        "requires_grad": t.requires_grad,
    }


def _payload() -> dict:
    x = torch.arange(12.0, device="vdev")
    return {
        "view": x[2:],
        "transposed": torch.arange(6, device="vdev").reshape(2, 3).t(),
        "bool": torch.tensor([True, False, True], device="vdev"),
        "param": torch.nn.Parameter(torch.ones(2, device="vdev")),
        "empty": torch.empty(0, device="vdev"),
        "device1": torch.arange(3.0, device="vdev:1"),
        "again": x,
    }


def _consume_roundtrip(q, res, back, bye) -> None:
    got = q.get(timeout=WAIT)
    out = {name: _describe(t) for name, t in got.items()}
    storage = got["again"].untyped_storage()
    out["same_storage"] = got["view"].untyped_storage().data_ptr() == storage.data_ptr()
    try:
        storage.resize_(1 << 20)
        out["resize"] = None
    except RuntimeError as e:
        out["resize"] = str(e)
    got["again"].mul_(10)  # the producer must see this write
    torch.vdev.synchronize()
    back.put(got["again"][1:3])  # a received tensor, sent back
    res.put(out)
    bye.get(timeout=WAIT)


def roundtrip() -> dict:
    ctx = mp.get_context("spawn")
    q, res, back, bye = ctx.Queue(), ctx.Queue(), ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=_consume_roundtrip, args=(q, res, back, bye))
    child.start()
    payload = _payload()
    q.put(payload)
    out = {"consumer": res.get(timeout=WAIT)}
    returned = back.get(timeout=WAIT)
    x = payload["again"]
    out["after_consumer_write"] = x.cpu().tolist()
    out["returned"] = _describe(returned)
    out["returned_is_own_storage"] = (
        returned.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    )
    bye.put(None)
    child.join(WAIT)
    out["exitcode"] = child.exitcode
    return out


def _consume_ordering(q, res, opened) -> None:
    x = q.get(timeout=WAIT)  # the producer's fill of x is still held by its gate
    y = x * 2  # queued behind the wait for the producer's writes
    done = torch.vdev.Event()
    done.record()
    res.put({"done_before_gate_opened": done.query()})
    opened.get(timeout=WAIT)
    res.put({"values": y.cpu().tolist()})


def ordering() -> dict:
    ctx = mp.get_context("spawn")
    q, res, opened = ctx.Queue(), ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=_consume_ordering, args=(q, res, opened))
    child.start()
    x = torch.zeros(4, device="vdev")
    torch.vdev.synchronize()
    gate = rt.Gate()
    rt.enqueue_gate(0, torch.vdev.current_stream().stream_id, gate)
    try:
        x.fill_(7.0)  # queued behind the gate: not done when x is sent
        q.put(x)
        out = res.get(timeout=WAIT)
    finally:
        gate.open()
    opened.put(None)
    out.update(res.get(timeout=WAIT))
    child.join(WAIT)
    out["exitcode"] = child.exitcode
    return out


def _consume_lifetime(q, res, step) -> None:
    x = q.get(timeout=WAIT)
    res.put({"received": str(x.device)})
    step.get(timeout=WAIT)  # the producer has dropped its tensor and allocated more
    intact = torch.equal(x.cpu(), torch.arange(float(x.numel())))
    res.put({"intact_after_producer_dropped": intact})
    step.get(timeout=WAIT)
    del x
    gc.collect()
    res.put({"released": True})
    step.get(timeout=WAIT)


def lifetime() -> dict:
    ctx = mp.get_context("spawn")
    q, res, step = ctx.Queue(), ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=_consume_lifetime, args=(q, res, step))
    child.start()
    n = 1 << 18  # 1 MiB of float32
    base = torch.vdev.memory_allocated()
    x = torch.arange(float(n), device="vdev")
    q.put(x)
    out = res.get(timeout=WAIT)
    del x
    gc.collect()
    torch.vdev.ipc_collect()
    out["held_while_received"] = torch.vdev.memory_allocated() - base
    junk = [torch.full((n,), -1.0, device="vdev") for _ in range(3)]  # would reuse a freed block
    torch.vdev.synchronize()
    step.put(None)
    out.update(res.get(timeout=WAIT))
    step.put(None)
    out.update(res.get(timeout=WAIT))
    del junk
    torch.vdev.ipc_collect()
    out["held_after_release"] = torch.vdev.memory_allocated() - base
    step.put(None)
    child.join(WAIT)
    out["exitcode"] = child.exitcode
    out["n"] = n
    return out


def _produce_then_exit(q, ready) -> None:
    x = torch.zeros(4, device="vdev")
    gate = rt.Gate()
    rt.enqueue_gate(0, torch.vdev.current_stream().stream_id, gate)
    x.fill_(7.0)  # never runs: the gate is never opened
    q.put(x)
    ready.get(timeout=WAIT)
    os._exit(0)


def sender_exits() -> dict:
    ctx = mp.get_context("spawn")
    q, ready = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=_produce_then_exit, args=(q, ready))
    child.start()
    kept = torch.arange(3.0, device="vdev")
    x = q.get(timeout=WAIT)
    ready.put(None)
    out: dict = {}
    try:
        x.cpu()
        out["error"] = None
    except RuntimeError as e:
        out["error"] = str(e)
    child.join(WAIT)
    out["exitcode"] = child.exitcode
    out["kept"] = kept.tolist()
    out["device_works"] = (torch.ones(2, device="vdev") + 1).tolist()
    return out


def _receive_in_fork(q, res) -> None:
    try:
        q.get(timeout=WAIT)
        res.put(None)
    except Exception as e:  # noqa: BLE001
        res.put(f"{type(e).__name__}: {e}")


def forked_receiver() -> dict:
    torch.ones(1, device="vdev")  # vdev is initialised before the fork
    ctx = mp.get_context("fork")
    q, res = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=_receive_in_fork, args=(q, res))
    child.start()
    q.put(torch.ones(2, device="vdev"))
    out = {"error": res.get(timeout=WAIT)}
    child.join(WAIT)
    out["exitcode"] = child.exitcode
    return out


def _sum_arguments(tensors, res) -> None:
    for t in tensors:
        t.add_(1)  # the parent sees these writes
    res.put({"count": len(tensors), "devices": sorted({str(t.device) for t in tensors})})
    tensors.clear()  # released here (Process keeps its arguments until the child exits)


def _open_fds() -> set[str]:
    """This process's descriptors, but the runtime's own memfds (an arena, a slot table)."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except FileNotFoundError:  # the listing's own descriptor
            continue
        if not target.startswith("/memfd:vdev"):
            out.add(fd)
    return out


def process_arguments() -> dict:
    """Many vdev tensors, on two devices, as a spawned Process's arguments (one message: each
    descriptor travels once, however many tensors name it)."""
    ctx = mp.get_context("spawn")
    res = ctx.Queue()
    tensors = [torch.full((3,), float(i), device=f"vdev:{i % 2}") for i in range(300)]
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()  # spawn starts it once and keeps a descriptor to it
    fds_before = _open_fds()
    child = ctx.Process(target=_sum_arguments, args=(tensors, res))
    child.start()
    out = res.get(timeout=WAIT)
    child.join(WAIT)
    out["exitcode"] = child.exitcode
    child.close()  # its sentinel descriptor
    out["written"] = all(t.tolist() == [i + 1.0] * 3 for i, t in enumerate(tensors))
    out["fds_left_open"] = sorted(_open_fds() - fds_before)
    return out


def _receive_within_limits(q, res) -> None:
    out = {}
    for case in ("too_large", "missing_device", "after_freeing_the_cache"):
        if case == "after_freeing_the_cache":
            cached = torch.empty(48 << 20, dtype=torch.uint8, device="vdev")
            del cached  # 48 MiB of the 64 cached: the 32 MiB received needs them back
        try:
            x = q.get(timeout=WAIT)
            out[case] = x[:3].tolist()
            del x
        except Exception as e:  # noqa: BLE001
            out[case] = f"{type(e).__name__}: {e}"
        res.put(None)
    out["device_works"] = (torch.ones(2, device="vdev") + 1).tolist()
    res.put(out)


def receiver_limits() -> dict:
    """A receiver with one device of 64 MiB: a tensor larger than its memory and one on a device
    it does not have are refused clearly, and the sender does not keep the memory for them."""
    ctx = mp.get_context("spawn")
    q, res = ctx.Queue(), ctx.Queue()
    os.environ.update(VDEV_DEVICE_COUNT="1", VDEV_DEVICE_MEMORY="64MiB")  # the child's
    child = ctx.Process(target=_receive_within_limits, args=(q, res))
    child.start()
    del os.environ["VDEV_DEVICE_COUNT"], os.environ["VDEV_DEVICE_MEMORY"]
    from torch_vdev import _C

    limbo = {}
    for case, x in (
        ("too_large", torch.arange(float(32 << 20), device="vdev:0")),  # 128 MiB
        ("missing_device", torch.arange(3.0, device="vdev:1")),
        ("after_freeing_the_cache", torch.arange(float(8 << 20), device="vdev:0")),  # 32 MiB
    ):
        q.put(x)
        res.get(timeout=WAIT)  # received (or refused) and dropped there
        del x
        gc.collect()
        torch.vdev.ipc_collect()
        limbo[case] = _C._ipc_in_limbo()
    out = res.get(timeout=WAIT)
    out["limbo"] = limbo
    child.join(WAIT)
    out["exitcode"] = child.exitcode
    return out


if __name__ == "__main__":
    try:
        result = globals()[sys.argv[1]]()
    except BaseException as e:  # noqa: BLE001
        result = {"scenario_error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
    print(json.dumps(result))
    sys.stdout.flush()
