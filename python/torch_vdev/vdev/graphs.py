"""Graphs of ``torch.vdev``, following ``torch.cuda.graphs``' names and semantics.

``torch.accelerator.Graph`` works on vdev as it does on CUDA (the C++ side is
``cpp/backend/graphs/graph.cpp``); this module adds ``torch.cuda``'s spellings: ``VdevGraph``
(``CUDAGraph``: pool and capture mode given to ``capture_begin``), the ``graph`` context manager
(which captures on a side stream, as ``torch.cuda.graph`` does), ``graph_pool_handle`` and
``is_current_stream_capturing``.
"""

from __future__ import annotations

import gc
from typing import Any

import torch

from torch_vdev import _C


def graph_pool_handle() -> tuple[int, int]:
    """A fresh memory pool id: graphs captured with ``pool=`` this handle share one pool. Sharing
    is safe when they are replayed in the order they were captured (as on CUDA)."""
    return _C._graph_pool_handle()


def is_current_stream_capturing() -> bool:
    """True while the current stream of the current vdev device captures a graph."""
    return torch.vdev.current_stream().is_capturing()


class VdevGraph(torch.accelerator.Graph):
    """A vdev graph, as ``torch.cuda.CUDAGraph``: ``capture_begin(pool=None,
    capture_error_mode="global")`` takes the pool and mode itself. Everything else is
    ``torch.accelerator.Graph``'s."""

    def __new__(cls, keep_graph: bool = False) -> VdevGraph:
        return super().__new__(cls, keep_graph)

    def __init__(self, keep_graph: bool = False) -> None:
        super().__init__(keep_graph)

    def capture_begin(  # type: ignore[override]
        self, pool: tuple[int, int] | None = None, capture_error_mode: str = "global"
    ) -> None:
        torch._C._acceleratorGraph.capture_begin(
            self, pool=pool, capture_error_mode=capture_error_mode
        )


class graph:
    """Context manager that captures the work queued inside it into ``vdev_graph``, as
    ``torch.cuda.graph``: it synchronizes, empties the cache, makes ``stream`` (by default one side
    stream shared by every ``graph``) current, and begins the capture with ``pool`` and
    ``capture_error_mode``; leaving ends the capture and restores the stream."""

    default_capture_stream: torch.Stream | None = None

    def __init__(
        self,
        vdev_graph: torch.accelerator.Graph,
        pool: tuple[int, int] | None = None,
        stream: torch.Stream | None = None,
        capture_error_mode: str = "global",
    ) -> None:
        if self.__class__.default_capture_stream is None:
            self.__class__.default_capture_stream = torch.vdev.Stream()
        self.pool = pool
        self.capture_stream = stream if stream is not None else self.default_capture_stream
        self.stream_ctx = torch.vdev.stream(self.capture_stream)
        self.vdev_graph = vdev_graph
        self.capture_error_mode = capture_error_mode

    def __enter__(self) -> None:
        torch.vdev.synchronize()
        if torch.compiler.config.force_cudagraph_gc:
            gc.collect()
        torch.vdev.empty_cache()
        self.stream_ctx.__enter__()
        try:
            torch._C._acceleratorGraph.capture_begin(
                self.vdev_graph, pool=self.pool, capture_error_mode=self.capture_error_mode
            )
        except BaseException:
            self.stream_ctx.__exit__(None, None, None)
            raise

    def __exit__(self, *args: Any) -> None:
        try:
            self.vdev_graph.capture_end()
        finally:
            self.stream_ctx.__exit__(*args)
