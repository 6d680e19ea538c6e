#include "backend/distributed/reducer_timer.h"

#include <c10/util/Exception.h>
#include <c10/util/Registry.h>

#include <cmath>
#include <exception>
#include <memory>

#include "backend/common/error_boundary.h"
#include "backend/common/stream_lookup.h"
#include "runtime/capture.h"

namespace vdev::backend {

ReducerTimer::ReducerTimer(c10::Device device)
    : device_(checked_device_index(device, "DistributedDataParallel")) {}

ReducerTimer::Slot& ReducerTimer::slot(Event event) {
  const auto index = static_cast<std::size_t>(event);
  TORCH_INTERNAL_ASSERT(index < kEvents, "unknown c10d::Timer::Event ", index);
  return slots_[index];
}

void ReducerTimer::record(Event event) {
  c10d::Timer::record(event);  // the host-side time, as CudaTimer keeps it too
  Slot& s = slot(event);
  vdev::rt::Stream& stream = current_runtime_stream(device_);
  // Noted here because the runtime event cannot tell afterwards whether its latest mark was
  // captured: querying or waiting for such a mark fails a capture that is still going on.
  const bool captured = vdev::rt::capture_of(stream) != nullptr;
  VDEV_RT(s.event.record(stream));
  s.recorded = true;
  s.captured = captured;
}

std::optional<int64_t> ReducerTimer::measureDifference(Event start, Event end) {
  Slot& a = slot(start);
  Slot& b = slot(end);
  if (!a.recorded || !b.recorded || a.captured || b.captured) return std::nullopt;
  try {
    a.event.synchronize();
    b.event.synchronize();
  } catch (const std::exception&) {
    // An earlier failure of the stream (kept by the mark) or the runtime shutting down: no time
    // to report, and the failure itself is raised by the stream, not by a statistic.
    return std::nullopt;
  }
  const double ms = VDEV_RT(a.event.elapsed_ms(b.event));
  if (ms < 0) return std::nullopt;  // `end` is from an earlier iteration than `start`
  return static_cast<int64_t>(std::llround(ms * 1e6));
}

}  // namespace vdev::backend

// What the reducer creates (TimerRegistry()->Create(device.type(), device)) for a vdev module. The
// macro names the registry unqualified, hence c10d's namespace, where CUDA registers its timer.
namespace c10d {
namespace {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::DeviceType::PrivateUse1, vdev::backend::ReducerTimer)
}  // namespace
}  // namespace c10d
