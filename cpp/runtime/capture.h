// Graph capture of the simulated driver: while a stream captures, the tasks queued on it are
// recorded instead of run, in the spirit of cudaStreamBeginCapture / cudaStreamEndCapture. A
// Capture is the TaskRecorder (runtime/stream.h) of its member streams: streams know only that
// interface, so this module depends on streams and not the other way round.
//
// A capture begins on one stream (its origin) and belongs to that stream's device. Other streams
// of the device join it the way CUDA's do: by waiting on an event recorded on a stream that
// captures (runtime/event.h). Every task queued on a member stream is recorded, in the order the
// host queued it; events recorded and waited on inside the capture become dependencies, tracked
// with one vector clock per member stream. end_capture() requires every joined stream's work to
// have been joined back into the origin (a wait on an event recorded after it), as CUDA does
// (cudaErrorStreamCaptureUnjoined), and returns the recorded tasks. Program order is a valid
// order for the whole graph (an event is recorded before it is waited on), so the layer above
// replays them in that order on one stream.
//
// Capture errors: an operation that conflicts with the capture invalidates it (the reason is kept)
// and throws std::runtime_error naming the operation: synchronizing or querying a member stream,
// synchronizing or querying an event recorded in the capture, a member stream waiting on an event
// recorded outside the capture (cudaErrorStreamCaptureIsolation), a stream of another device or of
// another capture joining it. Queueing on a stream whose capture was invalidated throws too;
// end_capture() then throws the reason, and in every case the streams leave capture mode, so the
// device keeps working. "Potentially unsafe" calls (a device-wide synchronize, a blocking copy,
// releasing cached memory: the calls that CUDA's legacy-stream semantics make unsafe) are checked
// with check_capture_permits(): under CaptureMode::kGlobal they fail on every thread while the
// capture runs, under kThreadLocal only on the capturing thread, under kRelaxed never
// (cudaStreamCaptureMode).
//
// Ownership: a Capture is shared by its member streams and by its owner (the layer above) until
// end_capture; the recorded tasks are then the caller's.
// Thread rules: every function is safe from any thread. Lock order: a Stream's mutex, then the
// Capture's, then the registry of active captures.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/export.h"
#include "runtime/stream.h"

namespace vdev::rt {

enum class CaptureMode : int { kGlobal = 0, kThreadLocal = 1, kRelaxed = 2 };

// One recorded task: what Stream::enqueue was given, and where.
struct CapturedTask {
  const char* name;
  std::int64_t stream_id;
  TaskFn fn;
  TaskTag tag;  // what it is, for the task observers when a replay runs it
};

// CaptureClock (runtime/stream.h): a stream's knowledge of the other member streams: for each,
// how many of its recorded tasks are ordered before this point. Captures have a handful of
// streams: a flat list.

class Capture;

// Begins capturing on `origin`. std::runtime_error if it already captures.
VDEV_RT_API std::shared_ptr<Capture> begin_capture(Stream& origin, CaptureMode mode);

// Ends `capture` on `stream`, which must be its origin (std::runtime_error otherwise, and the
// capture goes on). Every member stream leaves capture mode; then the reason is thrown if the
// capture was invalidated, or an unjoined stream is named. Otherwise returns the recorded tasks,
// in the order they were queued.
VDEV_RT_API std::vector<CapturedTask> end_capture(Capture& capture, Stream& stream);

// The id of a capture (unique in the process, never 0).
VDEV_RT_API std::uint64_t capture_id(const Capture& capture) noexcept;

// Stream `s` joins `c` (Stream::join_capture): false if it already captures.
VDEV_RT_API bool join_capture(Stream& s, const std::shared_ptr<Capture>& c,
                              const CaptureClock& clock);

// The capture stream `s` is a member of, or nullptr.
VDEV_RT_API std::shared_ptr<Capture> capture_of(const Stream& s);

// Invalidates `capture` (if it is still active) with `reason`, then throws std::runtime_error
// "[operation] reason (the graph capture on vdev:D stream S is invalidated...)".
[[noreturn]] VDEV_RT_API void fail_capture(Capture& capture, const char* operation,
                                           const std::string& reason);

// For a potentially unsafe operation: fails (invalidating the capture it conflicts with) when a
// capture in global mode is active on any thread, or one in thread-local mode on this thread.
VDEV_RT_API void check_capture_permits(const char* operation);

// Number of captures in progress in the process (a cheap test before looking further).
VDEV_RT_API int active_captures() noexcept;

// Used by Event (runtime/event.cpp) and, through the TaskRecorder interface, by Stream.
namespace detail {
// Records a task queued on member stream `s`; throws if the capture was invalidated.
void record_task(Capture& c, const Stream& s, const char* name, TaskFn fn, TaskTag tag);
// The clock an event recorded now on member stream `s` carries; throws if invalidated.
CaptureClock mark_clock(Capture& c, const Stream& s);
// Member stream `s` waits on a mark of the same capture.
void merge_clock(Capture& c, const Stream& s, const CaptureClock& clock);
// Stream `s` (not capturing; its mutex held by Stream::join_capture) joins `c` with `clock`;
// fails if `c` belongs to another device. Returns false if `c` has already ended.
bool add_member(Capture& c, const Stream& s, const CaptureClock& clock);
bool ended(const Capture& c) noexcept;
}  // namespace detail

}  // namespace vdev::rt
