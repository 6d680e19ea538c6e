// The sanitizer's numbers of device allocations (#1, #2, ... in reports): one process-wide counter,
// so that the stream sanitizer numbers each allocation it sees and composite_scopes.h can tell the
// allocations made since a point in time (those numbered from then on).
//
// Thread rules: lock-free; callable from any thread.
#pragma once

#include <cstdint>

namespace vdev::backend {

// A new number (the first is 1).
std::uint64_t take_allocation_number() noexcept;
// The number the next allocation will get.
std::uint64_t next_allocation_number() noexcept;

}  // namespace vdev::backend
