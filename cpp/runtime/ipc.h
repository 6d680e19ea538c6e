// Sharing device memory and stream positions with other processes on this host: the simulated
// driver's counterpart of cudaIpcGetMemHandle / cudaIpcOpenMemHandle and of IPC events, on which
// torch.multiprocessing's sharing of vdev tensors is built (backend/memory/ipc_sharing.h).
//
// Memory: a device address is named by the memfd behind its device's arena and its offset there
// (runtime/arena.h). Another process maps the pages holding the range into its own arena, where
// the bytes get a device address of that process (ipc_open_mem_handle), translate like any other
// and count as allocated there (runtime/memory.h); the two processes see each other's writes.
//
// Slots: a sending process owns tables of slots in shared memory (one memfd per table of
// kIpcSlotsPerTable slots). A slot holds
//   - refs, how many receivers may still use the memory sent with it (the sender keeps the
//     memory while it is above 0), and
//   - signal, the last generation of the slot whose stream position has been reached.
// IpcSentSlot::create takes a free slot (refs = 1, the next generation) and queues on the sender's
// stream a task that stores that generation into signal and wakes the waiters (a futex on the
// shared page). A receiver maps the table (IpcReceivedSlot) and queues on its own stream a task
// that waits until signal has reached the generation: its later work on that stream runs after
// the sender's queued writes. If the sending process exits first, the waiting task fails and says
// so (it never waits for ever). A slot is reused only once refs is 0 and its signal was given, so
// a receiver that looks late sees the same or a later generation: generations only grow.
//
// Thread rules: every function and member is safe from any thread. Ownership: the memfds of the
// arenas and of the slot tables are owned by the runtime (callers dup them to send them); a
// received table stays mapped while an IpcReceivedSlot of it lives.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/export.h"
#include "runtime/stream.h"

namespace vdev::rt {

inline constexpr std::uint32_t kIpcSlotsPerTable = 4096;

struct IpcMemHandle {
  int fd;  // the arena's memfd: owned by the runtime
  std::uint64_t offset;
};

// Names the device memory at `device_ptr`. Throws std::invalid_argument if it is not a device
// address, std::runtime_error if the device's memory cannot be shared (no memfd).
VDEV_RT_API IpcMemHandle ipc_get_mem_handle(const void* device_ptr);
// Maps `size` bytes at `offset` of another process's arena memfd `fd` into `device`'s memory here
// and returns the device address of the byte at `offset` (`size` > 0). Throws OutOfMemory when
// `device` cannot hold the pages, std::out_of_range for a bad device, std::runtime_error in a
// forked child (runtime/process.h) or if the mapping fails.
VDEV_RT_API void* ipc_open_mem_handle(int device, int fd, std::uint64_t offset, std::size_t size);
// Unmaps what ipc_open_mem_handle returned `device_ptr` for.
VDEV_RT_API void ipc_close_mem_handle(const void* device_ptr) noexcept;

// A slot this process sends (see above). Destroying it returns the slot to its table.
class VDEV_RT_API IpcSentSlot {
 public:
  // Takes a slot and queues its signal on `stream` (std::runtime_error if shared memory cannot be
  // created; enqueue's errors otherwise, the slot then goes back).
  static std::unique_ptr<IpcSentSlot> create(Stream& stream);
  ~IpcSentSlot();
  IpcSentSlot(const IpcSentSlot&) = delete;
  IpcSentSlot& operator=(const IpcSentSlot&) = delete;

  int fd() const noexcept;  // the table's memfd (owned by the runtime)
  std::uint32_t index() const noexcept { return index_; }
  std::uint32_t generation() const noexcept { return generation_; }
  // How many receivers still hold the memory sent with this slot.
  std::int64_t refs() const noexcept;
  // True once no receiver holds it and the signal was given: the memory may be reused.
  bool released() const noexcept;

 private:
  IpcSentSlot(std::uint32_t table, std::uint32_t index, std::uint32_t generation)
      : table_(table), index_(index), generation_(generation) {}
  std::uint32_t table_, index_, generation_;
};

struct ReceivedTable;

// Another process's slot, as a receiver sees it.
class VDEV_RT_API IpcReceivedSlot {
 public:
  // Maps the table behind memfd `fd` (once per table while slots of it live). Throws
  // std::invalid_argument for an index out of range, std::runtime_error if the mapping fails.
  IpcReceivedSlot(int fd, std::uint32_t index);
  ~IpcReceivedSlot();
  IpcReceivedSlot(const IpcReceivedSlot&) = delete;
  IpcReceivedSlot& operator=(const IpcReceivedSlot&) = delete;

  // Queues on `stream` a wait for the sender's signal of `generation`; the task fails if process
  // `sender_pid` exits first.
  void stream_wait(Stream& stream, std::uint32_t generation, int sender_pid);
  // Gives the receiver's reference back (refs -= 1); only the first call counts.
  void release() noexcept;

 private:
  std::shared_ptr<ReceivedTable> table_;
  std::uint32_t index_;
  std::atomic<bool> released_{false};
};

}  // namespace vdev::rt
