// Device memory of the simulated driver: allocation with a per-device capacity, pointer lookup,
// and copies between host and device memory, synchronous or queued on a stream.
//
// Addresses returned by device_malloc are *device addresses*: they lie in a PROT_NONE range, and
// host code that dereferences one faults (with a diagnostic, runtime/host_access.h). Kernels and
// copies reach the bytes through kernel_address(), the one translation point between the two
// views (runtime/arena.h). Freed memory goes back to the system at once: the caching allocator of
// the backend sits in front of device_malloc so that freeing is rare.
//
// Fork (runtime/process.h): allocating marks the runtime initialised; in a child forked after
// that, device_malloc throws and device_free leaks (the table's lock may be held by a thread that
// no longer exists).
//
// Ownership: device_malloc's caller owns the block until device_free. Freeing an address that was
// not returned by device_malloc is ignored (and counted), never undefined behaviour.
//
// Thread rules: every function is safe from any thread. Copies are synchronous and do not order
// themselves with other threads' accesses to the same bytes: that is the caller's (stream's) job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "runtime/export.h"
#include "runtime/task_trace.h"

namespace vdev::rt {

// Alignment of every device allocation (CUDA's cudaMalloc gives at least 256 bytes).
inline constexpr std::size_t kDeviceAlignment = 256;

struct MemoryStats {
  std::size_t capacity;        // VDEV_DEVICE_MEMORY
  std::size_t allocated;       // bytes in live allocations (rounded to kDeviceAlignment)
  std::size_t peak_allocated;  // since start
  std::size_t requested;       // bytes asked for by live allocations (not rounded)
  std::uint64_t num_allocs;    // successful allocations since start
  std::uint64_t num_frees;
  std::uint64_t num_ooms;  // allocations refused for lack of capacity
};

// Allocates `nbytes` on `device`. Returns nullptr for 0 bytes. Throws OutOfMemory when the device's
// capacity would be exceeded, std::out_of_range / std::invalid_argument for a bad device index.
VDEV_RT_API void* device_malloc(int device, std::size_t nbytes);
VDEV_RT_API void device_free(void* ptr) noexcept;

// Another process's device memory (runtime/ipc.h builds on these): maps `size` bytes (a multiple
// of the page size) of memfd `fd` at page-aligned `file_offset` into `device`'s address space and
// returns the device address of the first byte. The range counts as allocated on `device` (its
// capacity is what this process can address), so OutOfMemory is thrown as by device_malloc.
// device_free ignores it: device_unmap_foreign(ptr) (any address inside the range) undoes it.
VDEV_RT_API void* device_map_foreign(int device, int fd, std::size_t file_offset, std::size_t size);
VDEV_RT_API void device_unmap_foreign(const void* ptr) noexcept;

// The device owning the live allocation that contains `ptr`, or -1.
VDEV_RT_API int pointer_device(const void* ptr) noexcept;

// Address through which kernels and copies access the bytes at device address `ptr` (an offset
// into the device's kernel view, runtime/arena.h; `ptr` itself for a host address).
VDEV_RT_API void* kernel_address(const void* ptr) noexcept;
// True once `device` has memory and its device addresses fault on host access.
VDEV_RT_API bool device_memory_protected(int device) noexcept;

VDEV_RT_API MemoryStats memory_stats(int device);
// "4.00 MiB": bytes in the largest binary unit below 1024, for messages.
VDEV_RT_API std::string format_bytes(std::size_t bytes);
// (free, total) bytes of `device`.
VDEV_RT_API std::pair<std::size_t, std::size_t> mem_get_info(int device);

class Stream;

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };

// Queues a copy of `n` bytes on `stream`. The caller guarantees both ranges stay valid until the
// copy has run: `keep_alive` (anything the caller needs kept, e.g. a handle on a pinned block) is
// held by the queued task and released on the worker right after the copy. `host` says what the
// host side of a copy between host and device is (the runtime does not know pinned memory, the
// backend's allocator does); task observers show it (runtime/task_trace.h). A device-to-device
// copy between two devices is traced as a peer-to-peer copy.
VDEV_RT_API void memcpy_async(Stream& stream, void* dst, const void* src, std::size_t n,
                              CopyKind kind, std::shared_ptr<void> keep_alive = nullptr,
                              HostMemory host = HostMemory::kPageable);

// Synchronous copies of `n` bytes; device pointers are device addresses. They do not order
// themselves with queued work: callers synchronize the stream first.
VDEV_RT_API void memcpy_host_to_device(void* dst, const void* src, std::size_t n);
VDEV_RT_API void memcpy_device_to_host(void* dst, const void* src, std::size_t n);
VDEV_RT_API void memcpy_device_to_device(void* dst, const void* src, std::size_t n);

}  // namespace vdev::rt
