// Device address space: one protected arena per device.
//
// Each device owns two virtual ranges of the same size (its capacity, rounded up to 2 MiB),
// reserved on the device's first allocation:
//   - the device view, PROT_NONE: the addresses handed to PyTorch (device addresses). Host code
//     that dereferences one faults (runtime/host_access.h prints what happened);
//   - the kernel view, read/write: the same offsets, where kernels and copies reach the bytes.
// Translation is an offset (kernel = device - device_base + kernel_base), so it costs no system
// call and no lock: no mprotect per operator. Both views are anonymous mappings reserved with
// MAP_NORESERVE, so untouched capacity costs no memory; releasing a range gives its pages back to
// the system (madvise(MADV_DONTNEED)), so the process's resident memory drops.
//
// Ranges are carved out of the arena best-fit, 256-byte aligned, and coalesced when released.
//
// Thread rules: every function is safe from any thread. Ranges are guarded by one mutex per
// arena; translation reads views published once (release/acquire) and never changed.
// Ownership: arenas live until the process exits (workers may run during static destruction).
#pragma once

#include <cstddef>
#include <cstdint>

namespace vdev::rt::arena {

// Reserves a range of `size` bytes (a multiple of 256) on `device`, creating the arena on first
// use. Returns the device address, or nullptr when no free range is large enough. Throws
// std::runtime_error if the arena's address space cannot be reserved.
void* reserve(int device, std::size_t size, std::size_t capacity);
// Releases a range returned by reserve(); its pages go back to the system.
void release(int device, void* ptr, std::size_t size) noexcept;

// The device whose device view contains `addr`, or -1. Lock-free.
int device_of(std::uintptr_t addr) noexcept;
// Kernel-view address for a device address; `addr` itself when it is not a device address.
void* to_kernel(const void* addr) noexcept;
// True when device addresses fault on host access (false only if the protected reservation was
// refused and the arena fell back to one read/write view).
bool is_protected(int device) noexcept;

}  // namespace vdev::rt::arena
