// Memory history and snapshots across the devices (torch.vdev.memory._record_memory_history,
// _snapshot, the out-of-memory observer), as torch/csrc/cuda/memory_snapshot.cpp does for CUDA:
// it switches every device's cache (backend/memory/device_cache.h) to record the same history,
// gathers stacks with PyTorch's own CapturedTraceback (Python frames, TorchScript and Inductor
// frames, and C++ frames when asked), records torch.profiler.record_function annotations and
// torch.compile regions while history is on, and collects what a snapshot shows. The Python
// dictionary in CUDA's schema is made by the bindings (bindings/memory.cpp), with the names of
// trace actions from here.
//
// Thread rules: every function is safe from any thread. symbolize_stacks needs the GIL when the
// stacks hold Python frames (the bindings call it with the GIL held); the others must be called
// without it being needed (they never take it). Ownership: snapshots own copies of the entries and
// share the stacks (GatheredContext) with the caches.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/common/export.h"
#include "backend/memory/cache_history.h"

namespace vdev::backend {

// torch.cuda's _record_memory_history arguments, checked by the Python layer.
struct MemoryHistoryOptions {
  bool enabled = false;
  RecordContext when = RecordContext::NEVER;  // context=None/"state"/"alloc"/"all"
  bool cpp_stacks = false;                    // stacks="all": C++ frames too
  std::size_t max_entries = 1;                // per device; also for annotations
  bool clear_history = false;
  bool compile_context = false;  // record the innermost torch.compile region with each entry
  // record_function annotations of every thread, not only of the calling one.
  bool global_record_annotations = false;
  std::vector<std::string> skip_actions;  // TraceEntry action names ("alloc", ...)
};

// Applies to every device (as on CUDA). Stopping clears the recorded entries.
VDEV_BACKEND_API void record_memory_history(const MemoryHistoryOptions& options);
VDEV_BACKEND_API bool memory_history_enabled();

struct MemorySnapshot {
  std::vector<c10::CachingDeviceAllocator::SegmentInfo> segments;         // by device, then address
  std::vector<std::vector<TraceEntry>> device_traces;                     // one list per device
  std::vector<c10::CachingDeviceAllocator::AnnotationEntry> annotations;  // time_.t_ in us
  std::int64_t max_split_size = -1;  // the allocator's settings: any block may be split
};

// CUDA's name of a trace action (action_to_str in torch/csrc/cuda/memory_snapshot.cpp; the inverse
// of c10's parseTraceEntryAction, which skip_actions are parsed with).
VDEV_BACKEND_API const char* trace_action_name(TraceEntry::Action action);

// Every device's segments and, if `include_traces`, the recorded history.
VDEV_BACKEND_API MemorySnapshot memory_snapshot(bool include_traces);

// The frames of recorded stacks (torch::symbolize): stacks[i] indexes `frames` for contexts[i].
// Contexts must come from this module's history. Needs the GIL if they hold Python frames.
struct StackFrame {
  std::string filename;
  std::string name;
  std::uint64_t line;
};
struct SymbolizedStacks {
  std::vector<StackFrame> frames;
  std::vector<std::vector<std::uint64_t>> stacks;
};
VDEV_BACKEND_API SymbolizedStacks
symbolize_stacks(const std::vector<const c10::GatheredContext*>& contexts);

// backend/memory/cache_history.h: called before an out-of-memory error is raised.
VDEV_BACKEND_API void add_out_of_memory_observer(OutOfMemoryObserver observer);

// CUDA's _set_memory_metadata: a string recorded with the current device's trace entries.
VDEV_BACKEND_API void set_memory_metadata(const std::string& metadata);
VDEV_BACKEND_API std::string memory_metadata();

}  // namespace vdev::backend
