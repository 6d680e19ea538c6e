// Diagnostics for host code that touches device memory.
//
// Device addresses point into PROT_NONE ranges (runtime/arena.h), so a host dereference raises
// SIGSEGV. The handler installed here recognises such a fault and writes, before the process dies,
// which address was touched, which vdev device and allocation it belongs to, and that device
// memory is not host-accessible. It then hands the signal on, honouring the previous action's
// mask and flags: to the handler that was installed before it (Python's faulthandler, for
// instance, then prints the Python stack), or to the default action, which ends the process.
// Faults elsewhere are handed on untouched. The handler stays installed.
//
// Thread rules: install_host_access_diagnostics() may be called from any thread, any number of
// times (it installs once). The handler only uses async-signal-safe calls (write, sigaction,
// pthread_sigmask, atomics) and reads the allocation table only if no writer is changing it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vdev::rt {

void install_host_access_diagnostics() noexcept;

// For the handler: the live device allocation containing `addr` (start and size in bytes), if the
// allocation table can be read without blocking. Implemented by runtime/memory.cpp.
bool try_find_allocation(std::uintptr_t addr, std::uintptr_t* start, std::size_t* size) noexcept;

}  // namespace vdev::rt
