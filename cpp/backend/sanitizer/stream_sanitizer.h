// The stream sanitizer (VDEV_SANITIZER=streams): every launch (backend/common/launch.h) says which
// tensors the work reads and writes, and the sanitizer observes launches (launch_checks.h) before
// they are queued; it checks those bytes
// against what other streams and the host did that the new work is not ordered after (the
// happens-before relation of runtime/happens_before.h), raises StreamRaceError at the call (or
// warns) on a conflict, and records the accesses in its shadow memory (shadow_memory.h). The same
// calls feed the uninitialised-read tool (init_tracking.h).
//
// What reaches it: every launch (the executor's operators with their arguments by their schema's
// alias annotations and fresh outputs, the express lane's alike, copies with pinned host buffers,
// fills, compiled kernels' in_ptr / out_ptr / in_out_ptr buffers, collectives on the communication
// stream, graph replays with every access captured in the graph), every host run (a blocking
// copy's device side, an operator run on the host; host operators reading pinned memory,
// host_operators.h), and the allocators' events, so a block freed while another stream's use of it
// was pending (no record_stream) is reported when the block is used again.
//
// Call only when sanitizing_accesses() (settings.h).
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
#include "backend/common/launch.h"
#include "backend/sanitizer/access_record.h"
#include "backend/sanitizer/settings.h"
#include "runtime/stream.h"

namespace vdev::backend {

// Work queued on `stream` (a capturing stream: kept for the graph's replays instead).
VDEV_BACKEND_API void sanitize_queued(vdev::rt::Stream& stream, const char* op,
                                      c10::ArrayRef<TensorUse> uses);

// Work done now on the calling thread, after whatever synchronization it did.
VDEV_BACKEND_API void sanitize_host_access(const char* op, c10::ArrayRef<TensorUse> uses);

// Between these, on a thread: the synchronous call running there was checked as a whole, by its
// operator's rules (a HostRun with whole_call, common/operator_uses.h's uses), and the host
// accesses it makes to reach CPU's kernel are its own. at::native::cpu_fallback copies every tensor
// argument to the host first, out= arguments included, and the written ones back: those copies'
// reads are not checked again (an out= argument's copy-in reads bytes the kernel only writes, which
// the call's rules know and a copy cannot), their writes still are (and mark bytes written). Thread
// rules: a thread-local depth; both on the dispatching thread, around one call.
void enter_checked_host_call() noexcept;
void leave_checked_host_call() noexcept;

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
