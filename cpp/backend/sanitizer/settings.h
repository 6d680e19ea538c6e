// Which bug finders are on: VDEV_SANITIZER at start-up (runtime/config.h), or
// torch.vdev.sanitizer.enable/disable at run time.
//
//   streams  the stream sanitizer (backend/sanitizer/stream_sanitizer.h): accesses of two streams
//            to the same bytes, at least one a write, with no happens-before between them
//   init     reads of device bytes no operation wrote since they were allocated
//            (backend/sanitizer/init_tracking.h)
//   poison   fresh and freed device blocks are filled with 0xFF bytes (NaN in every floating
//            dtype, -1 or the largest value in integer ones), so stale reads show in values
//   warn     a finding is reported as a warning and the program goes on (default: it raises)
//
// The flags are set by switches.h. Thread rules: the flags are one atomic; a hot path pays one
// relaxed load. Changing them while other threads queue work is allowed: a task sees the flags as
// they were when it was queued.
#pragma once

#include <atomic>

#include "backend/common/export.h"
#include "runtime/config.h"

namespace vdev::backend {

namespace detail {
VDEV_BACKEND_API extern std::atomic<unsigned> g_sanitizer_flags;
}  // namespace detail

// vdev::rt::SanitizerFlag bits.
inline unsigned sanitizer_flags() noexcept {
  return detail::g_sanitizer_flags.load(std::memory_order_relaxed);
}
inline bool sanitizing_streams() noexcept {
  return (sanitizer_flags() & vdev::rt::kSanitizeStreams) != 0;
}
inline bool sanitizing_init() noexcept {
  return (sanitizer_flags() & vdev::rt::kSanitizeInit) != 0;
}
inline bool sanitizing_accesses() noexcept {
  return (sanitizer_flags() & (vdev::rt::kSanitizeStreams | vdev::rt::kSanitizeInit)) != 0;
}
inline bool poisoning() noexcept { return (sanitizer_flags() & vdev::rt::kSanitizePoison) != 0; }
inline bool sanitizer_warns() noexcept {
  return (sanitizer_flags() & vdev::rt::kSanitizeWarn) != 0;
}

}  // namespace vdev::backend
