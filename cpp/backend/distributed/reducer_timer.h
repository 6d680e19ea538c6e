// DDP's reducer timer for vdev: the c10d::Timer that DistributedDataParallel's reducer creates for
// a module on a vdev device (torch/csrc/distributed/c10d/reducer_timer.hpp), registered for
// PrivateUse1 in TimerRegistry as CUDA's CudaTimer is for CUDA. Without it the reducer warns
// "Time stats are currently only collected for CPU and CUDA devices" and the DDP logging data
// (`model._get_ddp_logging_data()`) has no forward, backward or communication times.
//
// CudaTimer's semantics, on vdev's streams:
//   - record(event) keeps the host time (c10d::Timer's fields, the "*_time_start/_end" entries of
//     the logging data) and records a timing event on the calling thread's current stream of the
//     module's device: the time is taken when that stream's worker reaches the mark, after the
//     work queued before it, so the durations are device time, as CUDA events measure.
//   - measureDifference(start, end) is the time from start's latest mark to end's, in ns;
//     nullopt when either event was never recorded (an iteration without backward, no_sync),
//     when end was last recorded before start (a stale event of an earlier iteration), or when
//     the marks cannot be timed (below). It waits on the host for both marks, as CudaTimer
//     synchronizes its events: the reducer asks at the start of the next sampled iteration's
//     forward, when the previous iteration's backward has mostly run. As CUDA's event
//     synchronize, that wait is not reported by the sync debug mode.
//   - A mark recorded while the stream captured a graph never completes (runtime/capture.h) and
//     must not be waited for (that would invalidate the capture): such an event measures nullopt
//     without being touched. A mark that carries an earlier failure of its stream measures
//     nullopt too: the error belongs to the stream, which raises it at its next synchronize or
//     enqueue (the forward that asked for the times queues work right after).
//
// Thread rules: the reducer calls record() and measureDifference() under its own mutex, and the
// host-side fields inherited from c10d::Timer are unguarded; one timer must not be used from two
// threads at once. The marks themselves complete on stream workers (runtime events are safe from
// any thread). Ownership: the reducer owns its timer (std::unique_ptr from the registry); the
// timer owns its five runtime events, and queued tasks hold only the marks, so the timer may be
// destroyed with records pending.
#pragma once

#include <c10/core/Device.h>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

#include <array>
#include <cstdint>
#include <optional>

#include "runtime/event.h"

namespace vdev::backend {

class ReducerTimer final : public c10d::Timer {
 public:
  // `device`: the module's vdev device (its current device when it has no index).
  explicit ReducerTimer(c10::Device device);

  void record(Event event) override;
  std::optional<int64_t> measureDifference(Event start, Event end) override;

 private:
  struct Slot {
    vdev::rt::Event event{/*timing=*/true};
    bool recorded = false;  // record() was called at least once
    bool captured = false;  // the latest record was on a stream that captured a graph
  };
  static constexpr std::size_t kEvents = 5;  // c10d::Timer::Event's values
  Slot& slot(Event event);

  const c10::DeviceIndex device_;
  std::array<Slot, kEvents> slots_;
};

}  // namespace vdev::backend
