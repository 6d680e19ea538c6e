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
// The handler learns what an address is through the lookups it is given (the device memory table,
// runtime/memory.cpp, installs it with the arenas' and its own), so this file depends on no other
// part of the runtime.
//
// Thread rules: install_host_access_diagnostics() may be called from any thread, any number of
// times (the first call installs; later ones change nothing). The handler only uses
// async-signal-safe calls (write, sigaction, pthread_sigmask, atomics) and reads the allocation
// table only if no writer is changing it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vdev::rt {

// What the handler asks about a faulting address. Both must be async-signal-safe.
struct DeviceAddressLookup {
  // The device whose address range holds `addr`, or -1.
  int (*device_of)(std::uintptr_t addr) noexcept;
  // The live device allocation containing `addr` (start and size in bytes), if it can be found
  // without blocking.
  bool (*find_allocation)(std::uintptr_t addr, std::uintptr_t* start, std::size_t* size) noexcept;
};

void install_host_access_diagnostics(DeviceAddressLookup lookup) noexcept;

}  // namespace vdev::rt
