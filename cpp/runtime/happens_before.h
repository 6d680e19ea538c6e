// Happens-before between the host and the streams: the vector clocks of the stream sanitizer
// (backend/sanitizer/), kept by the runtime because the runtime is where streams order work.
//
// While tracking is on, the host and every stream have a vector clock indexed by slot (slot 0 is
// the host, each stream gets the next slot the first time it is seen). A stream's own entry counts
// the tasks that access memory queued on it (begin_stream_task), so a pair (slot, seq) names one
// such task: an epoch. Edges, each at the call that creates it:
//   - stream order: a task of stream S happens after the tasks queued on S before it;
//   - the host: a task happens after everything the host knew had finished when it was queued
//     (one host clock for all host threads: a synchronize on one thread may have been followed by
//     a handover to another one the runtime cannot see, so no thread's knowledge is narrowed);
//   - Event.record copies the stream's clock into the event's mark; a stream waiting on the mark
//     (Event.block, so wait_stream too) merges it into its clock;
//   - Stream.synchronize, a true Stream.query, device synchronize, Event.synchronize and a true
//     Event.query merge the clock of what they waited for into the host's.
// Work queued while a stream captures a graph is not a task here (it runs at replay).
//
// Thread rules: every function is safe from any thread (one mutex). With tracking off, each hook
// costs its caller one relaxed load. Enabling starts every clock at zero: what was queued before
// is outside the relation (nothing recorded earlier can conflict).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/export.h"

namespace vdev::rt {

class Stream;

namespace hb {

using Clock = std::vector<std::uint32_t>;  // by slot; a missing entry is 0
using ClockPtr = std::shared_ptr<const Clock>;

inline constexpr std::uint32_t kHostSlot = 0;

// One task (or one synchronous host access) that accesses memory.
struct Epoch {
  std::uint32_t slot = kHostSlot;
  std::uint32_t seq = 0;
};

VDEV_RT_API void set_tracking(bool on);
VDEV_RT_API bool tracking() noexcept;

// The host queues a task that accesses memory on `s` (not capturing): s learns what the host
// knows, advances, and `clock` receives its clock (what happens before the task). Returns the
// task's epoch.
VDEV_RT_API Epoch begin_stream_task(const Stream& s, Clock& clock);
// A synchronous access by the host (a blocking copy, an operator run on the calling thread, a
// host operator on pinned memory): the host's epoch and clock.
VDEV_RT_API Epoch begin_host_access(Clock& clock);

// Whether `e` happens before whatever has clock `c`.
inline bool ordered_before(const Epoch& e, const Clock& c) {
  return e.slot < c.size() && c[e.slot] >= e.seq;
}
// Whether the host knows that `e` has finished.
VDEV_RT_API bool known_to_host(const Epoch& e);

// The slot of `s` (assigned now if new).
VDEV_RT_API std::uint32_t slot_of(const Stream& s);

// Hooks for the runtime's synchronizing calls (null clocks when tracking is off).
// The clock of `s` now: what a wait for the work queued so far will have waited for.
ClockPtr clock_of(const Stream& s);
// The host waited for (a snapshot taken before the wait of) `c`.
void host_learns(const ClockPtr& c) noexcept;
// Stream `s` waits for `c` (an event's mark).
void stream_learns(const Stream& s, const ClockPtr& c);

}  // namespace hb
}  // namespace vdev::rt
