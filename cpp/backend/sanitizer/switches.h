// Switching the sanitizer's tools on and off (settings.h has the flags the hot paths read): the
// happens-before relation (runtime/happens_before.h), the host-operator watcher
// (host_operators.h) and the allocation observer (allocation_events.h) follow the flags.
//
// Thread rules: safe from any thread; one change at a time.
#pragma once

#include "backend/common/export.h"

namespace vdev::backend {

// Sets the flags (vdev::rt::SanitizerFlag bits); turning the streams tool on starts the
// happens-before relation afresh, and changing the tools forgets what was recorded.
VDEV_BACKEND_API void set_sanitizer_flags(unsigned flags);

// At backend start-up: the flags VDEV_SANITIZER names (none when the configuration is malformed:
// its error is raised by the first device use).
void enable_sanitizer_from_config();

}  // namespace vdev::backend
