#include "runtime/arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "runtime/config.h"
#include "runtime/process.h"

namespace vdev::rt::arena {
namespace {

constexpr std::size_t kArenaGranularity = std::size_t{2} << 20;
constexpr std::size_t kMinAlignment = 256;  // every range offset is a multiple of it

std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

// Free ranges of one arena, best-fit by size, coalesced by offset.
class RangeSet {
 public:
  void add(std::size_t off, std::size_t len) {
    by_offset_.emplace(off, len);
    by_size_.emplace(len, off);
  }
  // A range of `len` bytes whose offset is a multiple of `align` (the slack goes back).
  std::optional<std::size_t> take_aligned(std::size_t len, std::size_t align) {
    const std::size_t padded = len + align - kMinAlignment;
    const std::optional<std::size_t> off = take(padded);
    if (!off) return std::nullopt;
    const std::size_t start = round_up(*off, align);
    if (start > *off) give_back(*off, start - *off);
    if (*off + padded > start + len) give_back(start + len, *off + padded - start - len);
    return start;
  }
  std::optional<std::size_t> take(std::size_t len) {
    auto it = by_size_.lower_bound({len, 0});
    if (it == by_size_.end()) return std::nullopt;
    const auto [have, off] = *it;
    by_size_.erase(it);
    by_offset_.erase(off);
    if (have > len) add(off + len, have - len);
    return off;
  }
  // Returns [off, len) and gives back the merged free range that now contains it.
  std::pair<std::size_t, std::size_t> give_back(std::size_t off, std::size_t len) {
    auto next = by_offset_.lower_bound(off);
    if (next != by_offset_.end() && next->first == off + len) {
      len += next->second;
      by_size_.erase({next->second, next->first});
      next = by_offset_.erase(next);
    }
    if (next != by_offset_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == off) {
        off = prev->first;
        len += prev->second;
        by_size_.erase({prev->second, prev->first});
        by_offset_.erase(prev);
      }
    }
    add(off, len);
    return {off, len};
  }

 private:
  std::map<std::size_t, std::size_t> by_offset_;
  std::set<std::pair<std::size_t, std::size_t>> by_size_;
};

struct Arena {
  // Published once (device_base last, with release) and never changed afterwards.
  std::atomic<std::uintptr_t> device_base{0};
  std::uintptr_t kernel_base = 0;
  std::size_t size = 0;
  bool protected_view = false;
  int fd = -1;  // the memfd behind the kernel view; -1: a private mapping, not shareable

  // Ranges mapping another arena's memfd (map_foreign), by offset, and one duplicate descriptor
  // per such memfd while ranges of it are mapped (a process may hold many received ranges: one
  // descriptor each could exhaust its descriptor limit); guarded by mu.
  using FileId = std::pair<dev_t, ino_t>;
  struct Foreign {
    std::size_t size;
    FileId file;
    std::size_t file_offset;
  };
  struct ForeignFile {
    int fd;
    int ranges;
  };
  std::map<std::size_t, Foreign> foreign;
  std::map<FileId, ForeignFile> foreign_files;

  std::mutex mu;  // guards free and creation
  RangeSet free;
};

std::array<Arena, kMaxDevices>& arenas() {
  static auto* a = [] {
    auto* made = new std::array<Arena, kMaxDevices>;  // leaked: see the header
    for (Arena& arena : *made) register_fork_lock(&arena.mu, ForkLockLevel::kArenas);
    return made;
  }();
  return *a;
}

void* map(std::size_t size, int prot) {
  void* p = mmap(nullptr, size, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// A memfd of `size` bytes named after the device, or -1 where memfd_create is refused.
int new_memfd(int device, std::size_t size) {
  const std::string name = "vdev:" + std::to_string(device);
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Maps [off, off + len) of the kernel view of `a` onto its own memory again.
bool map_own(const Arena& a, std::size_t off, std::size_t len) {
  void* at = reinterpret_cast<void*>(a.kernel_base + off);
  void* p = a.fd >= 0 ? mmap(at, len, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_FIXED | MAP_NORESERVE, a.fd, static_cast<off_t>(off))
                      : mmap(at, len, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  return p != MAP_FAILED;
}

// Creates the views of `a` (under a.mu).
void create_locked(Arena& a, int device, std::size_t capacity) {
  const std::size_t size =
      round_up(capacity == 0 ? kArenaGranularity : capacity, kArenaGranularity);
  a.fd = new_memfd(device, size);
  void* kernel = nullptr;
  if (a.fd >= 0) {
    kernel = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, a.fd, 0);
    if (kernel == MAP_FAILED) {
      kernel = nullptr;
      close(a.fd);
      a.fd = -1;
    }
  }
  if (kernel == nullptr) kernel = map(size, PROT_READ | PROT_WRITE);
  if (kernel == nullptr) {
    throw std::runtime_error("[device_malloc] cannot reserve " + std::to_string(size) +
                             " bytes of address space for vdev:" + std::to_string(device) +
                             " (VDEV_DEVICE_MEMORY too large for this machine?)");
  }
  void* device_view = map(size, PROT_NONE);
  a.protected_view = device_view != nullptr;
  if (device_view == nullptr) device_view = kernel;  // unprotected, but still correct
  a.kernel_base = reinterpret_cast<std::uintptr_t>(kernel);
  a.size = size;
  a.free.add(0, size);
  a.device_base.store(reinterpret_cast<std::uintptr_t>(device_view), std::memory_order_release);
}

}  // namespace

void* reserve(int device, std::size_t size, std::size_t capacity) {
  Arena& a = arenas()[static_cast<std::size_t>(device)];
  std::lock_guard<std::mutex> lock(a.mu);
  if (a.device_base.load(std::memory_order_relaxed) == 0) create_locked(a, device, capacity);
  const std::optional<std::size_t> off = a.free.take(size);
  if (!off) return nullptr;
  return reinterpret_cast<void*>(a.device_base.load(std::memory_order_relaxed) + *off);
}

void release(int device, void* ptr, std::size_t size) noexcept {
  Arena& a = arenas()[static_cast<std::size_t>(device)];
  const std::uintptr_t base = a.device_base.load(std::memory_order_acquire);
  const std::size_t off = reinterpret_cast<std::uintptr_t>(ptr) - base;
  std::lock_guard<std::mutex> lock(a.mu);
  const auto [merged_off, merged_len] = a.free.give_back(off, size);
  // Return whole pages of the merged free range (pages shared with live ranges stay). A memfd's
  // pages must be punched out of the file: MADV_DONTNEED would only unmap them here.
  const std::size_t page = page_size();
  const std::size_t first = round_up(merged_off, page);
  const std::size_t last = (merged_off + merged_len) / page * page;
  if (last > first) {
    madvise(reinterpret_cast<void*>(a.kernel_base + first), last - first,
            a.fd >= 0 ? MADV_REMOVE : MADV_DONTNEED);
  }
}

SharedLocation locate_shared(const void* ptr) {
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  const int device = device_of(addr);
  if (device < 0) throw std::invalid_argument("not a vdev device address");
  Arena& a = arenas()[static_cast<std::size_t>(device)];
  const std::size_t off = addr - a.device_base.load(std::memory_order_acquire);
  {
    // Bytes received from another process are named by that process's memfd (sent on, they
    // stay the same bytes).
    std::lock_guard<std::mutex> lock(a.mu);
    auto it = a.foreign.upper_bound(off);
    if (it != a.foreign.begin() && off - std::prev(it)->first < std::prev(it)->second.size) {
      --it;
      return {a.foreign_files.at(it->second.file).fd, it->second.file_offset + (off - it->first)};
    }
  }
  if (a.fd < 0) {
    throw std::runtime_error("vdev:" + std::to_string(device) +
                             " memory cannot be shared with other processes: this system "
                             "refused memfd_create when the device's memory was created");
  }
  return {a.fd, off};
}

void* map_foreign(int device, int fd, std::size_t file_offset, std::size_t size,
                  std::size_t capacity) {
  Arena& a = arenas()[static_cast<std::size_t>(device)];
  std::lock_guard<std::mutex> lock(a.mu);
  if (a.device_base.load(std::memory_order_relaxed) == 0) create_locked(a, device, capacity);
  const std::optional<std::size_t> off = a.free.take_aligned(size, page_size());
  if (!off) return nullptr;
  void* at = reinterpret_cast<void*>(a.kernel_base + *off);
  struct stat st{};
  const bool known = fstat(fd, &st) == 0;
  const Arena::FileId file{st.st_dev, st.st_ino};
  auto kept = a.foreign_files.find(file);
  const bool first = kept == a.foreign_files.end();
  const int dup = known && first ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
  if (!known || (first && dup < 0) ||
      mmap(at, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
           static_cast<off_t>(file_offset)) == MAP_FAILED) {
    const int err = errno;
    if (known && (!first || dup >= 0)) map_own(a, *off, size);  // MAP_FIXED may have unmapped it
    if (dup >= 0) close(dup);
    a.free.give_back(*off, size);
    throw std::runtime_error(std::string("cannot map another process's vdev memory: ") +
                             std::strerror(err));
  }
  if (first) kept = a.foreign_files.emplace(file, Arena::ForeignFile{dup, 0}).first;
  ++kept->second.ranges;
  a.foreign.emplace(*off, Arena::Foreign{size, file, file_offset});
  return reinterpret_cast<void*>(a.device_base.load(std::memory_order_relaxed) + *off);
}

void unmap_foreign(int device, void* addr, std::size_t size) noexcept {
  Arena& a = arenas()[static_cast<std::size_t>(device)];
  const std::size_t off =
      reinterpret_cast<std::uintptr_t>(addr) - a.device_base.load(std::memory_order_acquire);
  std::lock_guard<std::mutex> lock(a.mu);
  auto it = a.foreign.find(off);
  if (it != a.foreign.end()) {
    auto file = a.foreign_files.find(it->second.file);
    if (file != a.foreign_files.end() && --file->second.ranges == 0) {
      close(file->second.fd);
      a.foreign_files.erase(file);
    }
    a.foreign.erase(it);
  }
  // If even this fails (no memory for the mapping) the range stays out of the free set: it keeps
  // the foreign bytes mapped rather than handing them to a new allocation.
  if (map_own(a, off, size)) a.free.give_back(off, size);
}

int device_of(std::uintptr_t addr) noexcept {
  auto& all = arenas();
  for (std::size_t d = 0; d < all.size(); ++d) {
    const std::uintptr_t base = all[d].device_base.load(std::memory_order_acquire);
    if (base != 0 && addr - base < all[d].size) return static_cast<int>(d);
  }
  return -1;
}

void* to_kernel(const void* ptr) noexcept {
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  auto& all = arenas();
  for (const Arena& a : all) {
    const std::uintptr_t base = a.device_base.load(std::memory_order_acquire);
    if (base != 0 && addr - base < a.size)
      return reinterpret_cast<void*>(a.kernel_base + addr - base);
  }
  return const_cast<void*>(ptr);
}

std::size_t page_size() noexcept {
  static const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

bool is_protected(int device) noexcept {
  const Arena& a = arenas()[static_cast<std::size_t>(device)];
  return a.device_base.load(std::memory_order_acquire) != 0 && a.protected_view;
}

}  // namespace vdev::rt::arena
