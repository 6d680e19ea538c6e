// The sanitizer's allocation observer (backend/memory/allocation_observer.h): allocations, frees
// and record_stream feed the stream sanitizer and the uninitialised-read tool
// (stream_sanitizer.h), and poisoning (poison.h) fills fresh and freed blocks.
//
// Thread rules: called by the allocators on any thread; installed by set_sanitizer_flags.
#pragma once

#include "backend/memory/allocation_observer.h"

namespace vdev::backend {

// The one observer (lives until the process exits).
AllocationObserver& sanitizer_allocation_observer();

}  // namespace vdev::backend
