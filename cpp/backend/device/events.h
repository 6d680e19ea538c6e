// The registry of live vdev events: which c10 event handles (runtime Events made by the guard's
// record()) exist right now.
//
// torch.Event.elapsed_time accepts only exact torch.Event arguments, so torch.vdev.Event computes
// elapsed time from the raw ids Python holds (torch.Event.event_id). Those ids come from user
// code: elapsed_time_by_ids() checks them against this registry instead of trusting them.
//
// Thread rules: every function is safe from any thread (one mutex). Ownership: the guard creates
// and deletes the events; the registry only records which ones are alive.
#pragma once

#include <cstdint>

#include "backend/common/export.h"
#include "runtime/event.h"

namespace vdev::backend {

// A new runtime event, registered as live (the guard's record(), on first use of a handle).
vdev::rt::Event* create_event(bool enable_timing);
// Unregisters and deletes an event made by create_event. Never throws.
void destroy_event(vdev::rt::Event* event) noexcept;

// Elapsed milliseconds between two events given by their raw ids, which must be live vdev events
// (ValueError otherwise; RuntimeError when they are not both recorded, completed and timing).
VDEV_BACKEND_API double elapsed_time_by_ids(std::uintptr_t start, std::uintptr_t end);

}  // namespace vdev::backend
