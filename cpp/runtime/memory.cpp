#include "runtime/memory.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/arena.h"
#include "runtime/config.h"
#include "runtime/device.h"
#include "runtime/errors.h"
#include "runtime/host_access.h"
#include "runtime/process.h"
#include "runtime/stream.h"

namespace vdev::rt {
namespace {

struct Allocation {
  std::size_t size;       // rounded size
  std::size_t requested;  // size asked for
  int device;
  bool foreign = false;  // another process's memory (device_map_foreign)
};

// One lock for the whole table: runtime allocations are rare (the backend's caching allocator sits
// in front of them). Address translation does not use it (runtime/arena.h).
struct Table {
  std::mutex mu;
  std::map<std::uintptr_t, Allocation> live;  // keyed by start address, for range lookups
  std::vector<MemoryStats> stats;
  // `live` for the SIGSEGV diagnostic, which may not take `mu` (a mutex is not
  // async-signal-safe): writers, under mu, also hold this flag (kWriting) while they change
  // `live`; the handler reads `live` only if it can swap the flag from kFree to kReading at once.
  // A writer waits (spins) only while a dying process's handler reads.
  static constexpr int kFree = 0, kWriting = 1, kReading = 2;
  std::atomic<int> live_access{kFree};
};

// Holds Table::live_access for a change of `live` (the caller holds Table::mu).
class LiveWriter {
 public:
  explicit LiveWriter(Table& t) : t_(t) {
    int expected = Table::kFree;
    while (!t_.live_access.compare_exchange_weak(expected, Table::kWriting,
                                                 std::memory_order_acquire)) {
      expected = Table::kFree;
    }
  }
  ~LiveWriter() { t_.live_access.store(Table::kFree, std::memory_order_release); }
  LiveWriter(const LiveWriter&) = delete;
  LiveWriter& operator=(const LiveWriter&) = delete;

 private:
  Table& t_;
};

bool find_live_allocation(std::uintptr_t addr, std::uintptr_t* start, std::size_t* size) noexcept;

Table& table() {
  // Leaked on purpose: allocations may be freed by static destructors of other libraries (torch's
  // caches) after this translation unit's statics would have been destroyed.
  static Table* t = [] {
    auto* tbl = new Table;
    register_fork_lock(&tbl->mu, ForkLockLevel::kMemoryTable);
    // A host dereference of device memory gets a diagnosis (runtime/host_access.h) from the first
    // use of device memory on.
    install_host_access_diagnostics({&arena::device_of, &find_live_allocation});
    tbl->stats.assign(static_cast<std::size_t>(device_count_noexcept()),
                      MemoryStats{config_error() ? 0 : config().device_memory, 0, 0, 0, 0, 0, 0});
    return tbl;
  }();
  return *t;
}

bool find_live_allocation(std::uintptr_t addr, std::uintptr_t* start, std::size_t* size) noexcept {
  // In a signal handler: atomics only, never a lock, never a wait.
  Table& t = table();
  int expected = Table::kFree;
  if (!t.live_access.compare_exchange_strong(expected, Table::kReading,
                                             std::memory_order_acquire)) {
    return false;  // being changed right now (by this thread, even): do not look
  }
  bool found = false;
  auto it = t.live.upper_bound(addr);
  if (it != t.live.begin()) {
    --it;
    if (addr < it->first + it->second.size) {
      *start = it->first;
      *size = it->second.size;
      found = true;
    }
  }
  t.live_access.store(Table::kFree, std::memory_order_release);
  return found;
}

std::size_t round_up(std::size_t n) {
  return (n + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
}

}  // namespace

void* device_malloc(int device, std::size_t nbytes) {
  check_device_index(device, "device_malloc");
  check_not_forked("device_malloc");
  if (nbytes == 0) return nullptr;
  mark_initialised();
  const std::size_t size = round_up(nbytes);
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  MemoryStats& s = t.stats[static_cast<std::size_t>(device)];
  void* p = nullptr;
  if (size <= s.capacity - s.allocated && nbytes <= size) {
    p = arena::reserve(device, size, s.capacity);
  }
  if (p == nullptr) {
    ++s.num_ooms;
    fail<OutOfMemory>("device_malloc", "vdev:", device, " out of memory: tried to allocate ",
                      format_bytes(nbytes), "; device capacity ", format_bytes(s.capacity), ", ",
                      format_bytes(s.capacity - s.allocated), " free, ", format_bytes(s.allocated),
                      " allocated");
  }
  try {
    LiveWriter writing(t);
    t.live.emplace(reinterpret_cast<std::uintptr_t>(p), Allocation{size, nbytes, device});
  } catch (...) {  // out of host memory for the table entry: the arena range goes back
    arena::release(device, p, size);
    throw;
  }
  s.allocated += size;
  s.requested += nbytes;
  s.peak_allocated = std::max(s.peak_allocated, s.allocated);
  ++s.num_allocs;
  return p;
}

void device_free(void* ptr) noexcept {
  if (ptr == nullptr || in_bad_fork()) return;
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.live.find(reinterpret_cast<std::uintptr_t>(ptr));
  // not ours: ignore rather than corrupt the arena
  if (it == t.live.end() || it->second.foreign) return;
  const Allocation a = it->second;
  MemoryStats& s = t.stats[static_cast<std::size_t>(a.device)];
  s.allocated -= a.size;
  s.requested -= a.requested;
  ++s.num_frees;
  {
    LiveWriter writing(t);
    t.live.erase(it);
  }
  arena::release(a.device, ptr, a.size);
}

void* device_map_foreign(int device, int fd, std::size_t file_offset, std::size_t size) {
  check_device_index(device, "ipc_open_mem_handle");
  check_not_forked("ipc_open_mem_handle");
  mark_initialised();
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  MemoryStats& s = t.stats[static_cast<std::size_t>(device)];
  void* p = nullptr;
  if (size <= s.capacity - s.allocated) {
    p = arena::map_foreign(device, fd, file_offset, size, s.capacity);
  }
  if (p == nullptr) {
    ++s.num_ooms;
    fail<OutOfMemory>("ipc_open_mem_handle", "vdev:", device,
                      " out of memory: cannot map another process's ", format_bytes(size),
                      "; device capacity ", format_bytes(s.capacity), ", ",
                      format_bytes(s.capacity - s.allocated), " free");
  }
  try {
    LiveWriter writing(t);
    t.live.emplace(reinterpret_cast<std::uintptr_t>(p), Allocation{size, size, device, true});
  } catch (...) {
    arena::unmap_foreign(device, p, size);
    throw;
  }
  s.allocated += size;
  s.requested += size;
  s.peak_allocated = std::max(s.peak_allocated, s.allocated);
  return p;
}

void device_unmap_foreign(const void* ptr) noexcept {
  if (ptr == nullptr || in_bad_fork()) return;
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.live.upper_bound(addr);
  if (it == t.live.begin()) return;
  --it;
  if (!it->second.foreign || addr >= it->first + it->second.size) return;
  const Allocation a = it->second;
  void* start = reinterpret_cast<void*>(it->first);
  MemoryStats& s = t.stats[static_cast<std::size_t>(a.device)];
  s.allocated -= a.size;
  s.requested -= a.requested;
  {
    LiveWriter writing(t);
    t.live.erase(it);
  }
  arena::unmap_foreign(a.device, start, a.size);
}

std::string format_bytes(std::size_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

int pointer_device(const void* ptr) noexcept {
  // Any address inside a device's arena belongs to that device (a PyTorch pointer into a device
  // tensor never points elsewhere): no lock and no table lookup.
  return arena::device_of(reinterpret_cast<std::uintptr_t>(ptr));
}

void* kernel_address(const void* ptr) noexcept { return arena::to_kernel(ptr); }

bool device_memory_protected(int device) noexcept {
  return device >= 0 && device < device_count_noexcept() && arena::is_protected(device);
}

MemoryStats memory_stats(int device) {
  check_device_index(device, "memory_stats");
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.stats[static_cast<std::size_t>(device)];
}

std::pair<std::size_t, std::size_t> mem_get_info(int device) {
  const MemoryStats s = memory_stats(device);
  return {s.capacity - s.allocated, s.capacity};
}

void memcpy_async(Stream& stream, void* dst, const void* src, std::size_t n, CopyKind kind,
                  std::shared_ptr<void> keep_alive, HostMemory host) {
  const char* name = kind == CopyKind::HostToDevice   ? "copy_host_to_device"
                     : kind == CopyKind::DeviceToHost ? "copy_device_to_host"
                                                      : "copy_device_to_device";
  // Between two devices CUPTI reports a peer-to-peer copy (PtoP), not a DtoD one.
  const TaskKind traced = kind == CopyKind::HostToDevice               ? TaskKind::kMemcpyHtoD
                          : kind == CopyKind::DeviceToHost             ? TaskKind::kMemcpyDtoH
                          : pointer_device(dst) != pointer_device(src) ? TaskKind::kMemcpyPtoP
                                                                       : TaskKind::kMemcpyDtoD;
  TaskTag tag{traced, n};
  if (kind != CopyKind::DeviceToDevice) tag.host = host;
  stream.enqueue(
      name,
      [dst, src, n, kind, keep = std::move(keep_alive)] {
        switch (kind) {
          case CopyKind::HostToDevice:
            memcpy_host_to_device(dst, src, n);
            break;
          case CopyKind::DeviceToHost:
            memcpy_device_to_host(dst, src, n);
            break;
          case CopyKind::DeviceToDevice:
            memcpy_device_to_device(dst, src, n);
            break;
        }
      },
      tag);
}

void memcpy_host_to_device(void* dst, const void* src, std::size_t n) {
  if (n) std::memcpy(kernel_address(dst), src, n);
}

void memcpy_device_to_host(void* dst, const void* src, std::size_t n) {
  if (n) std::memcpy(dst, kernel_address(src), n);
}

void memcpy_device_to_device(void* dst, const void* src, std::size_t n) {
  if (n) std::memmove(kernel_address(dst), kernel_address(src), n);
}

}  // namespace vdev::rt
