"""--vdev-leak-check: a test that ends with more device memory allocated than it began fails,
naming the allocations it left alive (as PyTorch's CudaMemoryLeakCheck)."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable
from typing import Any

import pytest

from torch_vdev.pytest_plugin.queued_errors import devices, synchronize_all
from torch_vdev.pytest_plugin.settings import State

# Frames of the harness around every test: noise in an allocation's stack.
_HARNESS_PATHS = (
    f"{os.sep}_pytest{os.sep}",
    f"{os.sep}pluggy{os.sep}",
    os.path.dirname(os.path.abspath(__file__)) + os.sep,
)
_MAX_FRAMES = 8
_MAX_LISTED = 20


def _allocated() -> list[int]:
    import torch

    return [torch.vdev.memory_allocated(d) for d in devices()]


def _live_blocks() -> list[dict[str, Any]]:
    """The live allocations of every device, from the allocator's snapshot (what
    torch.vdev.memory._snapshot() shows PyTorch's memory viewer)."""
    import torch

    blocks = []
    for segment in torch.vdev.memory._snapshot()["segments"]:
        address = segment["address"]
        for block in segment["blocks"]:
            if block["state"] == "active_allocated":
                blocks.append(
                    {
                        "device": segment["device"],
                        "stream": segment["stream"],
                        "address": block.get("address", address),
                        "size": block["size"],
                        "requested_size": block.get("requested_size", block["size"]),
                        "frames": block.get("frames", []),
                    }
                )
            address += block["size"]
    return blocks


def _identity(block: dict[str, Any]) -> tuple[int, int, int]:
    return block["device"], block["address"], block["size"]


def record_baseline(state: State) -> None:
    state.before_allocated = _allocated()
    if any(state.before_allocated):
        gc.collect()  # garbage of earlier tests could be freed during this one and hide a leak
        state.before_allocated = _allocated()
    # Nothing allocated: every live block afterwards is new, no need for a snapshot now.
    state.before_blocks = (
        {_identity(b) for b in _live_blocks()} if any(state.before_allocated) else set()
    )


def _grown(state: State) -> list[tuple[int, int, int]]:
    after = _allocated()
    # vdev not initialized when the test began: nothing was allocated then (no list either).
    before = state.before_allocated + [0] * (len(after) - len(state.before_allocated))
    return [(d, b, now) for d, (b, now) in enumerate(zip(before, after, strict=True)) if now > b]


def check_leaks(state: State) -> None:
    import torch

    synchronize_all()  # done by the call wrapper already; frees wait on their streams
    gc.collect()
    grown = _grown(state)
    if grown:
        # As CudaMemoryLeakCheck: a block freed while a stream used it (record_stream) counts as
        # allocated until the allocator processes its events; empty_cache does, after waiting.
        gc.collect()
        torch.vdev.empty_cache()
        grown = _grown(state)
    if grown:
        pytest.fail(_leak_report(state, grown), pytrace=False)


def _leak_report(state: State, grown: list[tuple[int, int, int]]) -> str:
    leaking = {d for d, _, _ in grown}
    live = [b for b in _live_blocks() if b["device"] in leaking]
    new = [b for b in live if _identity(b) not in state.before_blocks]
    lines = ["vdev leak check: the test ended with more device memory allocated than it began:"]
    lines += [
        f"  vdev:{d}: {now - before} bytes more ({before} -> {now} bytes allocated)"
        for d, before, now in grown
    ]
    if new:
        lines.append(f"Allocations made by the test and still alive ({len(new)}):")
        listed = new
    else:
        # An address freed and reused by the test: it cannot be told apart, so all are listed.
        lines.append(f"Allocations alive on the device(s) ({len(live)}; the test's among them):")
        listed = live
    for block in listed[:_MAX_LISTED]:
        lines.append(
            f"  vdev:{block['device']} {_stream(block['stream'])}: {block['size']} bytes "
            f"({block['requested_size']} requested) at {block['address']:#x}"
        )
        lines += [f"    {frame}" for frame in _python_frames(block["frames"])]
    if len(listed) > _MAX_LISTED:
        lines.append(f"  ... and {len(listed) - _MAX_LISTED} more")
    if not any(block["frames"] for block in listed):
        lines.append(
            "Where each was allocated: record memory history, e.g. "
            'torch.vdev.memory._record_memory_history(stacks="python") in a session fixture.'
        )
    lines.append(
        "Tensors kept alive by the test (a module-level cache, a global list, a reference cycle "
        "holding a frame) free their memory only when released."
    )
    return "\n".join(lines)


def _stream(stream: int) -> str:
    return "stream 0 (the default stream)" if stream == 0 else f"stream {stream}"


def _python_frames(frames: Iterable[dict[str, Any]]) -> list[str]:
    """A block's Python frames from the allocation up to the test (the harness's frames below it
    are noise), most recent call last as in a traceback. The snapshot lists the innermost frame
    first and, with stacks="all", C++ frames among them."""
    shown: list[dict[str, Any]] = []
    for f in frames:
        if any(p in f["filename"] for p in _HARNESS_PATHS):
            break  # pytest calling the test: what follows is the harness and the interpreter
        if f["filename"].endswith(".py") or f["filename"].startswith("<"):
            shown.append(f)
    return [
        f'File "{f["filename"]}", line {f["line"]}, in {f["name"]}' for f in shown[:_MAX_FRAMES]
    ][::-1]
