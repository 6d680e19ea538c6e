// The sanitizer as a launch observer (backend/common/launch.h): every launch, host run and graph
// replay reaches the stream sanitizer and the init tool through the one description the queuing
// site made, so no queuing layer knows the sanitizer. Installed by the sanitizer's switch
// (switches.h) while the stream or init tool is on, as the allocation observer is.
//
// Thread rules: the observer is called on queuing threads, concurrently; it keeps no state of its
// own beyond a thread-local depth of whole host calls (stream_sanitizer.h). Ownership: one
// instance, never destroyed.
#pragma once

#include "backend/common/launch.h"

namespace vdev::backend {

LaunchObserver& sanitizer_launch_observer();

}  // namespace vdev::backend
