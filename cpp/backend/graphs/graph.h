// vdev's accelerator graphs: the at::GraphImplInterface behind torch.accelerator.Graph (registered
// for "VDEV" in graph.cpp), in the spirit of CUDA's CUDAGraph (aten/src/ATen/cuda/CUDAGraph.cpp).
//
// capture_begin() puts the current stream of the current device in capture mode
// (runtime/capture.h): the tasks queued on it, and on the streams that join it through events, are
// recorded instead of run. Allocations of the capture come from the graph's private pool (or the
// pool given) in the caching allocator (backend/memory/device_cache.h); random operators record
// offsets within the graph (backend/random/graph_draws.h). capture_end() ends the capture, and
// instantiate() (at capture_end unless keep_graph) freezes the recorded tasks into an executable
// graph. replay() queues ONE task on the current stream of the graph's device that runs the
// recorded tasks in program order, on the same device addresses: it returns once queued, and costs
// the host one enqueue whatever the graph's size. reset() (and the destructor) releases the pool.
//
// Thread rules: one Graph is used by one thread at a time, as CUDA's (the Python front end calls
// every method with the GIL released, so the object holds no Python state). Replays on several
// streams may run at once; each resolves its own random draws.
// Ownership: the executable graph is shared by the Graph and its queued replays, so a Graph may be
// destroyed while replays are pending; its pool is released after the device's queued work.
#pragma once

#include <c10/core/Allocator.h>

#include "backend/common/export.h"

namespace vdev::backend {

// torch.vdev.graph_pool_handle(): a fresh pool id that graphs can share (CUDA's
// graph_pool_handle).
VDEV_BACKEND_API c10::MempoolId_t graph_pool_handle();

}  // namespace vdev::backend
