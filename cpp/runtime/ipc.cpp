#include "runtime/ipc.h"

#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/arena.h"
#include "runtime/memory.h"
#include "runtime/process.h"

namespace vdev::rt {

// One slot as it lies in shared memory (the layout every process of this build agrees on).
struct SharedSlot {
  std::atomic<std::int64_t> refs;
  std::atomic<std::uint32_t> signal;  // a futex word
  std::uint32_t unused;
};
static_assert(sizeof(SharedSlot) == 16);
static_assert(std::atomic<std::int64_t>::is_always_lock_free);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

namespace {

constexpr std::size_t kTableBytes = kIpcSlotsPerTable * sizeof(SharedSlot);

long futex(std::atomic<std::uint32_t>* word, int op, std::uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), op, value, timeout, nullptr, 0);
}

// Generations wrap around: `signal` has reached `generation` when it is not behind it.
bool reached(std::uint32_t signal, std::uint32_t generation) {
  return static_cast<std::int32_t>(signal - generation) >= 0;
}

SharedSlot* map_table(int fd) {
  void* p = mmap(nullptr, kTableBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    throw std::runtime_error(std::string("cannot map a vdev IPC slot table: ") +
                             std::strerror(errno));
  }
  return static_cast<SharedSlot*>(p);
}

// The tables this process sends slots from. Leaked: receivers may hold slots until this process
// exits, and the signal tasks may run during exit.
struct SentTables {
  struct Table {
    int fd;
    SharedSlot* slots;
    std::vector<std::uint32_t> generation;  // the last generation handed out, per slot
  };
  std::mutex mu;
  std::vector<Table> tables;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> free;  // (table, index)

  // Adds a table (under mu).
  void grow() {
    const int fd = memfd_create("vdev-ipc-slots", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(kTableBytes)) != 0) {
      const int err = errno;
      if (fd >= 0) close(fd);
      throw std::runtime_error(std::string("cannot create shared memory for vdev IPC: ") +
                               std::strerror(err));
    }
    SharedSlot* slots = nullptr;
    try {
      slots = map_table(fd);
    } catch (...) {
      close(fd);
      throw;
    }
    const auto t = static_cast<std::uint32_t>(tables.size());
    tables.push_back({fd, slots, std::vector<std::uint32_t>(kIpcSlotsPerTable, 0)});
    for (std::uint32_t i = kIpcSlotsPerTable; i-- > 0;) free.emplace_back(t, i);
  }
};

SentTables& sent_tables() {
  static SentTables* t = new_leaked_with_fork_lock<SentTables>(ForkLockLevel::kIpcSlots);
  return *t;
}

SharedSlot& sent_slot(std::uint32_t table, std::uint32_t index) {
  SentTables& t = sent_tables();
  std::lock_guard<std::mutex> lock(t.mu);  // `tables` may grow (and move) meanwhile
  return t.tables[table].slots[index];
}

// Whether process `pid` has exited (a zombie counts as exited: nobody may reap it while we wait).
class ProcessWatch {
 public:
  explicit ProcessWatch(int pid) : pid_(pid) {
#ifdef SYS_pidfd_open
    pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#endif
  }
  ~ProcessWatch() {
    if (pidfd_ >= 0) close(pidfd_);
  }
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;

  bool exited() const {
    if (pidfd_ >= 0) {
      pollfd p{pidfd_, POLLIN, 0};
      return poll(&p, 1, 0) > 0;  // readable once the process has terminated
    }
    return kill(pid_, 0) != 0 && errno == ESRCH;
  }

 private:
  int pid_;
  int pidfd_ = -1;
};

}  // namespace

IpcMemHandle ipc_get_mem_handle(const void* device_ptr) {
  const arena::SharedLocation at = arena::locate_shared(device_ptr);
  return {at.fd, at.offset};
}

void* ipc_open_mem_handle(int device, int fd, std::uint64_t offset, std::size_t size) {
  if (size == 0) throw std::invalid_argument("ipc_open_mem_handle: size must be positive");
  const std::size_t page = arena::page_size();
  const std::uint64_t first = offset / page * page;
  const std::uint64_t last = (offset + size + page - 1) / page * page;
  auto* base = static_cast<char*>(
      device_map_foreign(device, fd, static_cast<std::size_t>(first), last - first));
  return base + (offset - first);
}

void ipc_close_mem_handle(const void* device_ptr) noexcept { device_unmap_foreign(device_ptr); }

std::unique_ptr<IpcSentSlot> IpcSentSlot::create(Stream& stream) {
  SentTables& t = sent_tables();
  std::uint32_t table = 0, index = 0, generation = 0;
  SharedSlot* slot = nullptr;
  {
    std::lock_guard<std::mutex> lock(t.mu);
    if (t.free.empty()) t.grow();
    std::tie(table, index) = t.free.back();
    t.free.pop_back();
    generation = ++t.tables[table].generation[index];
    slot = &t.tables[table].slots[index];
    slot->refs.store(1, std::memory_order_release);
  }
  std::unique_ptr<IpcSentSlot> made(new IpcSentSlot(table, index, generation));
  stream.enqueue("ipc_record_event", [slot, generation] {
    slot->signal.store(generation, std::memory_order_release);
    futex(&slot->signal, FUTEX_WAKE, INT_MAX, nullptr);  // shared: other processes wait on it
  });                                                    // on failure `made` gives the slot back
  return made;
}

IpcSentSlot::~IpcSentSlot() {
  SentTables& t = sent_tables();
  std::lock_guard<std::mutex> lock(t.mu);
  t.free.emplace_back(table_, index_);
}

int IpcSentSlot::fd() const noexcept {
  SentTables& t = sent_tables();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.tables[table_].fd;
}

std::int64_t IpcSentSlot::refs() const noexcept {
  return sent_slot(table_, index_).refs.load(std::memory_order_acquire);
}

bool IpcSentSlot::released() const noexcept {
  const SharedSlot& s = sent_slot(table_, index_);
  return s.refs.load(std::memory_order_acquire) <= 0 &&
         reached(s.signal.load(std::memory_order_acquire), generation_);
}

// A table of another process, mapped while slots of it are held. One mapping per table: the
// registry keeps weak references, keyed by the memfd's identity.
struct ReceivedTable {
  explicit ReceivedTable(SharedSlot* mapped) : slots(mapped) {}
  ~ReceivedTable() { munmap(slots, kTableBytes); }
  ReceivedTable(const ReceivedTable&) = delete;
  ReceivedTable& operator=(const ReceivedTable&) = delete;
  SharedSlot* const slots;
};

namespace {

struct ReceivedTables {
  std::mutex mu;
  std::map<std::pair<dev_t, ino_t>, std::weak_ptr<ReceivedTable>> mapped;
};

ReceivedTables& received_tables() {
  static ReceivedTables* t = new_leaked_with_fork_lock<ReceivedTables>(ForkLockLevel::kIpcSlots);
  return *t;
}

std::shared_ptr<ReceivedTable> received_table(int fd) {
  struct stat st{};
  if (fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < kTableBytes) {
    throw std::runtime_error("not a vdev IPC slot table (file descriptor " + std::to_string(fd) +
                             ")");
  }
  ReceivedTables& t = received_tables();
  std::lock_guard<std::mutex> lock(t.mu);
  std::weak_ptr<ReceivedTable>& entry = t.mapped[{st.st_dev, st.st_ino}];
  if (auto live = entry.lock()) return live;
  auto made = std::make_shared<ReceivedTable>(map_table(fd));
  entry = made;
  return made;
}

}  // namespace

IpcReceivedSlot::IpcReceivedSlot(int fd, std::uint32_t index) : index_(index) {
  if (index >= kIpcSlotsPerTable) {
    throw std::invalid_argument("vdev IPC slot index " + std::to_string(index) +
                                " out of range 0.." + std::to_string(kIpcSlotsPerTable - 1));
  }
  table_ = received_table(fd);
}

IpcReceivedSlot::~IpcReceivedSlot() = default;

void IpcReceivedSlot::stream_wait(Stream& stream, std::uint32_t generation, int sender_pid) {
  stream.enqueue("ipc_wait_event", [table = table_, index = index_, generation, sender_pid] {
    std::atomic<std::uint32_t>& signal = table->slots[index].signal;
    const ProcessWatch sender(sender_pid);
    for (;;) {
      const std::uint32_t seen = signal.load(std::memory_order_acquire);
      if (reached(seen, generation) || stopping()) return;
      if (sender.exited()) {
        // The signal may have been given just before the exit.
        if (reached(signal.load(std::memory_order_acquire), generation)) return;
        throw std::runtime_error("the process that sent this tensor (pid " +
                                 std::to_string(sender_pid) +
                                 ") exited before its queued writes to it were done");
      }
      const timespec poll_every{0, 50'000'000};  // to notice the sender's exit and ours
      futex(&signal, FUTEX_WAIT, seen, &poll_every);
    }
  });
}

void IpcReceivedSlot::release() noexcept {
  if (released_.exchange(true)) return;
  table_->slots[index_].refs.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace vdev::rt
