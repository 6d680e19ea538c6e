// Sharing vdev storages with other processes on this host (torch.multiprocessing), with the rules
// of CUDA's IPC sharing (torch/csrc/CudaIPCTypes.h, StorageSharing.cpp), on runtime/ipc.h:
//
// - Sender: share_storage() names the storage's bytes (the device's memfd and offset) and takes a
//   slot: a reference count of 1 for the receiver, and a signal queued on the device's current
//   stream. The storage's DataPtr is wrapped (as CUDA's CudaIPCSentData): when this process frees
//   the storage while a receiver still holds the bytes, or before the signal was given, the
//   allocator's block waits in the *limbo* instead of being freed. collect_shared() frees what
//   no receiver holds any more; it runs whenever a shared storage is freed, before the allocator
//   reports out of memory, and from torch.vdev.ipc_collect().
// - Receiver: adopt_shared_storage() maps the bytes into this process and makes a storage of them
//   (not resizable); the current stream of the device waits for the sender's signal, so work
//   queued after it sees the sender's writes queued before the send. Freeing that storage waits
//   for the device's queued work here, unmaps the bytes and gives the reference back. The same
//   bytes received again (the caller caches storages by memfd and offset, as torch does by IPC
//   handle) need only wait_and_release().
//
// Thread rules: every function is safe from any thread. Ownership: a shared DataPtr owns the
// allocator's DataPtr it wraps; limbo entries live until collected (or the process exits).
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/StorageImpl.h>

#include <cstdint>

#include "backend/common/export.h"

namespace vdev::backend {

struct SharedStorageHandle {
  int device;
  int memory_fd;  // the arena's memfd (owned by the runtime: dup it to send it)
  std::uint64_t offset;
  std::uint64_t nbytes;
  int slot_fd;  // the slot table's memfd (owned by the runtime)
  std::uint32_t slot;
  std::uint32_t generation;
  int sender_pid;
};

// Sender. `storage` is a vdev storage of at least one byte. Throws c10::Error (ValueError) for a
// storage that is not one, std::runtime_error if the memory cannot be shared.
VDEV_BACKEND_API SharedStorageHandle share_storage(c10::StorageImpl& storage);
// Receiver: `empty` (a vdev storage of 0 bytes) takes the sent bytes; `memory_fd` and `slot_fd`
// are this process's descriptors of the sender's memfds (the caller closes them afterwards).
VDEV_BACKEND_API void adopt_shared_storage(c10::StorageImpl& empty, const SharedStorageHandle& h,
                                           int memory_fd, int slot_fd);
// Receiver, for bytes already held: the current stream waits for the signal, then the reference
// taken for this send is given back.
VDEV_BACKEND_API void wait_and_release(const SharedStorageHandle& h, int slot_fd);
// Receiver, for a send it cannot take (adopt_shared_storage does it for its own failures): gives
// the reference back, so that the sender does not keep the memory for nothing. Best effort.
VDEV_BACKEND_API void give_back_reference(const SharedStorageHandle& h, int slot_fd) noexcept;
// Frees the limbo's blocks that no receiver holds. Returns whether any was freed.
VDEV_BACKEND_API bool collect_shared() noexcept;
// Number of blocks in the limbo (receivers still hold them).
VDEV_BACKEND_API std::size_t shared_in_limbo() noexcept;
// The DataPtr a sender's shared DataPtr wraps, or nullptr if `p` is not one.
const c10::DataPtr* unwrap_shared(const c10::DataPtr& p) noexcept;

}  // namespace vdev::backend
