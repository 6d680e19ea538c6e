// Device address space: one protected arena per device.
//
// Each device owns two virtual ranges of the same size (its capacity, rounded up to 2 MiB),
// reserved on the device's first allocation:
//   - the device view, PROT_NONE: the addresses handed to PyTorch (device addresses). Host code
//     that dereferences one faults (runtime/host_access.h prints what happened);
//   - the kernel view, read/write: the same offsets, where kernels and copies reach the bytes.
// Translation is an offset (kernel = device - device_base + kernel_base), so it costs no system
// call and no lock: no mprotect per operator. Both views are reserved with MAP_NORESERVE, so
// untouched capacity costs no memory. The kernel view is a shared mapping of a memfd (one per
// device), so that other processes can map the same bytes (runtime/ipc.h); releasing a range
// punches its pages out of the memfd (madvise(MADV_REMOVE)), so resident memory drops. Where
// memfd_create is refused the kernel view is a private anonymous mapping (nothing can be shared).
//
// Foreign ranges: map_foreign() maps a range of another arena's memfd (another process's device
// memory) over a range of this arena's kernel view, so its bytes get a device address here and
// translate like any other; unmap_foreign() puts this arena's own memory back.
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
// Where the bytes at device address `addr` lie: its arena's memfd and offset, or, for bytes mapped
// from another process (map_foreign), that process's memfd and offset. Throws std::invalid_argument
// if `addr` is not a device address, std::runtime_error if its arena is not backed by a memfd.
struct SharedLocation {
  int fd;  // owned by the arena (valid while the range is): dup it to send it
  std::size_t offset;
};
SharedLocation locate_shared(const void* addr);
// Maps `size` bytes (a multiple of the page size) of memfd `fd` at `file_offset` (page-aligned)
// into `device`'s arena. Returns the device address of the first byte (page-aligned), or nullptr
// when no free range is large enough. Throws std::runtime_error if the mapping fails.
void* map_foreign(int device, int fd, std::size_t file_offset, std::size_t size,
                  std::size_t capacity);
// Undoes map_foreign(`addr`, `size`): the range holds this arena's memory again and is free.
void unmap_foreign(int device, void* addr, std::size_t size) noexcept;

// The system's page size (the granularity of map_foreign).
std::size_t page_size() noexcept;

// True when device addresses fault on host access (false only if the protected reservation was
// refused and the arena fell back to one read/write view).
bool is_protected(int device) noexcept;

}  // namespace vdev::rt::arena
