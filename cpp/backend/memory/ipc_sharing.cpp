#include "backend/memory/ipc_sharing.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/Exception.h>
#include <unistd.h>

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/common/error_boundary.h"
#include "backend/common/vdev_device.h"
#include "runtime/device.h"
#include "runtime/ipc.h"
#include "runtime/process.h"
#include "runtime/stream_registry.h"

namespace vdev::backend {
namespace {

// What a sender's shared DataPtr points to.
struct SentData {
  c10::DataPtr original;  // the allocator's (or an earlier send's)
  std::unique_ptr<vdev::rt::IpcSentSlot> slot;
};

struct Limbo {
  std::mutex mu;
  std::vector<std::unique_ptr<SentData>> held;
};

Limbo& limbo() {
  static Limbo* l =
      vdev::rt::new_leaked_with_fork_lock<Limbo>(vdev::rt::ForkLockLevel::kBackendLeaves);
  return *l;
}

void sent_delete(void* ctx) {
  std::unique_ptr<SentData> sent(static_cast<SentData*>(ctx));
  if (!sent->slot->released()) {
    std::lock_guard<std::mutex> lock(limbo().mu);
    limbo().held.push_back(std::move(sent));
  }
  sent.reset();  // frees the block (outside the limbo's lock: it takes the allocator's)
  collect_shared();
}

// What a receiver's DataPtr points to.
struct ReceivedData {
  void* ptr;
  int device;
  vdev::rt::IpcReceivedSlot slot;
};

void received_delete(void* ctx) {
  std::unique_ptr<ReceivedData> got(static_cast<ReceivedData*>(ctx));
  // Queued work of any stream may still use the bytes (CUDA waits for the current stream only).
  vdev::rt::wait_device_idle(got->device);
  got->slot.release();
  vdev::rt::ipc_close_mem_handle(got->ptr);
}

// The receiver's side of `ptr` (mapped already), its stream waiting for the sender's signal.
std::unique_ptr<ReceivedData> receive(void* ptr, const SharedStorageHandle& h, int slot_fd) {
  std::unique_ptr<ReceivedData> got(
      new ReceivedData{ptr, h.device, vdev::rt::IpcReceivedSlot(slot_fd, h.slot)});
  try {
    got->slot.stream_wait(vdev::rt::current_stream(h.device), h.generation, h.sender_pid);
  } catch (...) {
    got->slot.release();
    throw;
  }
  return got;
}

}  // namespace

void give_back_reference(const SharedStorageHandle& h, int slot_fd) noexcept {
  try {
    vdev::rt::IpcReceivedSlot(slot_fd, h.slot).release();
  } catch (...) {  // a table that cannot be mapped: the sender's block stays in its limbo
  }
}

SharedStorageHandle share_storage(c10::StorageImpl& storage) {
  const c10::Device device = storage.device();
  TORCH_CHECK_VALUE(device.type() == kVdev, "share_storage: expected a vdev storage, got ", device);
  TORCH_CHECK_VALUE(storage.nbytes() > 0 && storage.data() != nullptr,
                    "share_storage: a storage of 0 bytes has no memory to share");
  const int index = device.index();
  void* ptr = storage.mutable_data();
  const vdev::rt::IpcMemHandle mem = VDEV_RT(vdev::rt::ipc_get_mem_handle(ptr));
  auto sent = std::make_unique<SentData>();
  sent->slot = VDEV_RT(vdev::rt::IpcSentSlot::create(vdev::rt::current_stream(index)));
  const SharedStorageHandle h{index,
                              mem.fd,
                              mem.offset,
                              storage.nbytes(),
                              sent->slot->fd(),
                              sent->slot->index(),
                              sent->slot->generation(),
                              static_cast<int>(getpid())};
  SentData* raw = sent.release();
  raw->original = storage.set_data_ptr(c10::DataPtr(ptr, raw, &sent_delete, device));
  return h;
}

void adopt_shared_storage(c10::StorageImpl& empty, const SharedStorageHandle& h, int memory_fd,
                          int slot_fd) {
  TORCH_CHECK_VALUE(
      empty.device().type() == kVdev && empty.nbytes() == 0 && empty.device().index() == h.device,
      "adopt_shared_storage: expected an empty storage on vdev:", h.device);
  TORCH_CHECK_VALUE(h.nbytes > 0, "adopt_shared_storage: nothing was shared (0 bytes)");
  const auto open = [&] {
    return VDEV_RT(vdev::rt::ipc_open_mem_handle(h.device, memory_fd, h.offset, h.nbytes));
  };
  void* ptr = nullptr;
  try {
    try {
      ptr = open();
    } catch (const c10::OutOfMemoryError&) {
      // As an allocation would: give the cached blocks back, then try once more (through c10's
      // registry: the allocator module depends on this one, not the other way round).
      c10::getDeviceAllocator(kVdev)->emptyCache({0, 0});
      ptr = open();
    }
  } catch (...) {
    give_back_reference(h, slot_fd);  // the sender must not keep the memory for nothing
    throw;
  }
  std::unique_ptr<ReceivedData> got;
  try {
    got = VDEV_RT(receive(ptr, h, slot_fd));
  } catch (...) {
    vdev::rt::ipc_close_mem_handle(ptr);
    throw;
  }
  const c10::Device device(kVdev, static_cast<c10::DeviceIndex>(h.device));
  empty.set_data_ptr_noswap(c10::DataPtr(ptr, got.release(), &received_delete, device));
  empty.set_nbytes(h.nbytes);
  empty.set_resizable(false);  // the bytes are the sender's: growing them would write past them
}

void wait_and_release(const SharedStorageHandle& h, int slot_fd) {
  vdev::rt::IpcReceivedSlot slot = VDEV_RT(vdev::rt::IpcReceivedSlot(slot_fd, h.slot));
  // The reference goes now, queued or not (a stream error refuses the wait): the sender frees
  // the memory only once the signal was given too (IpcSentSlot::released), and the queued wait
  // holds the table.
  try {
    VDEV_RT(slot.stream_wait(vdev::rt::current_stream(h.device), h.generation, h.sender_pid));
  } catch (...) {
    slot.release();
    throw;
  }
  slot.release();
}

bool collect_shared() noexcept {
  std::vector<std::unique_ptr<SentData>> freed;
  {
    std::lock_guard<std::mutex> lock(limbo().mu);
    auto& held = limbo().held;
    for (auto it = held.begin(); it != held.end();) {
      if ((*it)->slot->released()) {
        freed.push_back(std::move(*it));
        it = held.erase(it);
      } else {
        ++it;
      }
    }
  }
  return !freed.empty();  // `freed` frees the blocks here, outside the limbo's lock
}

std::size_t shared_in_limbo() noexcept {
  std::lock_guard<std::mutex> lock(limbo().mu);
  return limbo().held.size();
}

const c10::DataPtr* unwrap_shared(const c10::DataPtr& p) noexcept {
  if (p.get_deleter() != &sent_delete) return nullptr;
  return &static_cast<const SentData*>(p.get_context())->original;
}

}  // namespace vdev::backend
