// The stream sanitizer (VDEV_SANITIZER=streams): every layer that queues work on a stream says
// which tensors the work reads and writes, before queueing it; the sanitizer checks those bytes
// against what other streams and the host did that the new work is not ordered after (the
// happens-before relation of runtime/happens_before.h), raises StreamRaceError at the call (or
// warns) on a conflict, and records the accesses in its shadow memory (shadow_memory.h). The same
// calls feed the uninitialised-read tool (init_tracking.h).
//
// Who calls what: the executor for every queued operator (arguments by their schema's alias
// annotations, fresh outputs), copies (source read, destination written, pinned host buffers
// included), fills, compiled kernels (in_ptr / out_ptr / in_out_ptr buffers), collectives (their
// tensors, on the communication stream), graph replays (every access captured in the graph), and
// synchronous work on the calling thread (sanitize_host_access: a blocking copy's device side, an
// operator run on the host, a host operator reading pinned memory). The allocator reports
// allocations, frees and record_stream, so a block freed while another stream's use of it was
// pending (no record_stream) is reported when the block is used again.
//
// Call only when sanitizing_accesses() (settings.h): the callers keep the off path to one load.
//
// Thread rules: safe from any thread; one mutex guards the shadow memory. Python stacks are
// gathered before it is taken and reports are formatted after it is released (both may take the
// GIL).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "backend/common/export.h"
#include "backend/sanitizer/access_record.h"
#include "backend/sanitizer/settings.h"
#include "runtime/stream.h"

namespace vdev::backend {

struct TensorUse {
  at::Tensor tensor;
  Access access;
};

// Work queued on `stream` (a capturing stream: kept for the graph's replays instead).
VDEV_BACKEND_API void sanitize_queued(vdev::rt::Stream& stream, const char* op,
                                      c10::ArrayRef<TensorUse> uses);
// The call sites' form: one relaxed load when the tools are off.
inline void sanitize_task(vdev::rt::Stream& stream, const char* op,
                          std::initializer_list<TensorUse> uses) {
  if (C10_UNLIKELY(sanitizing_accesses())) {
    sanitize_queued(stream, op, c10::ArrayRef<TensorUse>(uses.begin(), uses.size()));
  }
}

// Work done now on the calling thread, after whatever synchronization it did.
VDEV_BACKEND_API void sanitize_host_access(const char* op, c10::ArrayRef<TensorUse> uses);

// While alive on a thread: the synchronous call running there was checked as a whole, by its
// operator's rules (sanitize_host_access with operator_uses.h's uses), and the host accesses it
// makes to reach CPU's kernel are its own. at::native::cpu_fallback copies every tensor argument
// to the host first, out= arguments included, and the written ones back: those copies' reads are
// not checked again (an out= argument's copy-in reads bytes the kernel only writes, which the
// call's rules know and a copy cannot), their writes still are (and mark bytes written).
// Thread rules: a thread-local flag; the scope lives on the dispatching thread for one call.
class VDEV_BACKEND_API CheckedHostCall {
 public:
  CheckedHostCall();
  ~CheckedHostCall();
  CheckedHostCall(const CheckedHostCall&) = delete;
  CheckedHostCall& operator=(const CheckedHostCall&) = delete;

 private:
  bool outer_;
};

// Graph capture and replay: what streams capturing `capture_id` queued is replayed by
// sanitize_replay as one task of the replaying stream.
VDEV_BACKEND_API void sanitize_replay(vdev::rt::Stream& stream, std::uint64_t capture_id);
VDEV_BACKEND_API void forget_capture(std::uint64_t capture_id);

// The allocators' events (allocation_events.h).
void sanitizer_allocated(void* ptr, std::size_t bytes, const vdev::rt::Stream& stream);
// Returns whether other streams were declared users of the block (Tensor.record_stream).
bool sanitizer_freed(void* ptr);
void sanitizer_recorded_stream(void* ptr, const vdev::rt::Stream& stream);

// Drops the records of [ptr, ptr + bytes) (a pinned host block handed out again: the copies that
// used it have finished, retained_memory.h) / marks bytes written on the host outside operators
// (a storage resize keeping its old bytes).
void sanitizer_forget_range(void* ptr, std::size_t bytes);
void sanitizer_host_wrote(void* ptr, std::size_t bytes);

// Drops every record (the tools were switched off, or on afresh).
void forget_sanitizer_state();

// For tests and benchmarks: cells in the shadow memory, allocations tracked.
VDEV_BACKEND_API std::size_t sanitizer_shadow_cells();

}  // namespace vdev::backend
