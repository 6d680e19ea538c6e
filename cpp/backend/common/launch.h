// A launch: the one description of a piece of work queued on a stream, and of work done now on the
// host for a device operation. Every tool reads this description, nothing else:
//   - the profiler's task records (runtime/task_trace.h) get the tag derived from it (kind, bytes,
//     size hint), and the thread policy (thread_policy.h) the intra-op thread limits;
//   - the launch observers (below: the sanitizer, backend/sanitizer/, and tests) get the launch
//     itself: the stream, the operation's name, the kind, the size and the tensors it reads and
//     writes.
// Queuing sites build a Launch and call queue_launch (common/task.h) or queue_copy (a runtime
// memcpy); host work is announced with HostRun. A site names its tensors once, and does not know
// which tools run: adding an operator path means building a Launch, and nothing else.
//
// The tensors: declared (an array of TensorUse, non-owning: the caller's tensors outlive the call
// that queues), or derived on demand (a function that makes them, for the executor, which reads
// them off its schema's alias annotations: common/operator_uses.h). Only an observer asks for
// them, so with no observer a launch costs building this struct and one relaxed load.
//
// Thread rules: a Launch lives on the queuing thread for the one call; observers are called there,
// before the work is queued (a task queued after its observer saw it: the sanitizer's record of it
// comes first). add_launch_observer / remove_launch_observer may be called from any thread; an
// observer may still be called by a thread that loaded the observers just before it was removed.
// Ownership: an observer must live until the process exits.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/FunctionRef.h>

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "backend/common/export.h"
#include "backend/common/thread_policy.h"
#include "runtime/stream.h"
#include "runtime/task_trace.h"

namespace vdev::backend {

enum class Access : std::uint8_t {
  kRead,
  kWrite,      // every byte overwritten without being read (out=, a fill, a copy's destination)
  kReadWrite,  // an in-place update
};

// A tensor the work reads or writes. Non-owning: the tensor must outlive the call that uses it.
struct TensorUse {
  TensorUse(const at::Tensor& t, Access a) : tensor(&t), access(a) {}
  const at::Tensor* tensor;
  Access access;
};

// Calls its argument once with the uses (the storage they point into lives for that call).
using UseVisitor = c10::function_ref<void(c10::ArrayRef<TensorUse>)>;
using UseSource = c10::function_ref<void(UseVisitor)>;

// Uses of tensors their maker holds (copies, or members made on the fly): add them, then visit.
class HeldUses {
 public:
  void add(at::Tensor tensor, Access access) {
    tensors_.push_back(std::move(tensor));
    accesses_.push_back(access);
  }
  void append(const HeldUses& other) {
    tensors_.insert(tensors_.end(), other.tensors_.begin(), other.tensors_.end());
    accesses_.insert(accesses_.end(), other.accesses_.begin(), other.accesses_.end());
  }
  void clear() {
    tensors_.clear();
    accesses_.clear();
  }
  VDEV_BACKEND_API void visit(UseVisitor visitor) const;

 private:
  std::vector<at::Tensor> tensors_;
  std::vector<Access> accesses_;
};

// The tensors of a launch or host run: declared, or derived when an observer asks.
class LaunchUses {
 public:
  LaunchUses() = default;
  // Declared. An initializer list's array lives until the end of the full expression that queues.
  LaunchUses(std::initializer_list<TensorUse> uses) : declared_(uses.begin(), uses.size()) {}
  LaunchUses(c10::ArrayRef<TensorUse> uses) : declared_(uses) {}  // NOLINT(runtime/explicit)
  // Derived by `source` when an observer asks (the callable must outlive the launch).
  static LaunchUses derived(UseSource source) {
    LaunchUses u;
    u.derive_ = source;
    return u;
  }

  void visit(UseVisitor visitor) const {
    if (derive_) {
      derive_(visitor);
    } else {
      visitor(declared_);
    }
  }

 private:
  c10::ArrayRef<TensorUse> declared_;
  UseSource derive_;
};

// Work queued on a stream.
struct Launch {
  vdev::rt::Stream& stream;
  const char* name;  // must live until the process exits (a literal, intern_task_name)
  vdev::rt::TaskKind kind = vdev::rt::TaskKind::kKernel;
  LaunchUses uses = {};
  // Its size: a kernel's most elements of one tensor it touches (0: unknown) and its
  // multiply-adds (a product, a convolution); the bytes a copy, fill or collective moves.
  std::uint64_t elements = 0;
  std::uint64_t multiply_adds = 0;
  std::uint64_t bytes = 0;
  vdev::rt::HostMemory host = vdev::rt::HostMemory::kPageable;  // a copy's host side
  std::uint64_t replays_capture = 0;  // a graph replay: the capture it replays
  // The operator the work belongs to, where the task has a name of its own (a copy kernel of
  // aten::copy_, named like CUDA's); nullptr: `name`. What reports name.
  const char* operation = nullptr;

  const char* operation_name() const { return operation != nullptr ? operation : name; }
};

// The profiler's tag of a launch: its kind, bytes, and size hint (the elements, or the
// multiply-adds / kMultiplyAddsPerElement if more).
inline vdev::rt::TaskTag task_tag(const Launch& launch) {
  std::uint64_t hint = launch.elements;
  const std::uint64_t by_products = launch.multiply_adds / kMultiplyAddsPerElement;
  if (by_products > hint) hint = by_products;
  return vdev::rt::TaskTag{launch.kind, launch.bytes, hint, launch.host};
}

// The size of a kernel that reads or writes `tensors` (undefined ones skipped): the most elements
// of one of them.
VDEV_BACKEND_API std::uint64_t most_elements(std::initializer_list<const at::TensorBase*> tensors);

// Work done now on the calling thread for a device operation, after whatever waiting it did (a
// blocking copy's device side, an operator run on the host).
struct HostRun {
  const char* name;  // lives for the call: an observer that keeps it copies it
  LaunchUses uses = {};
  // The run is a whole operator call checked by its operator's rules: the host accesses it makes
  // to reach CPU's kernel (copies of its arguments) are its own, and their reads are not separate
  // accesses (an out= argument's copy-in reads bytes the kernel only writes). Set by HostRunScope
  // only, which also tells its end: observers may count open whole calls.
  bool whole_call = false;
};

class LaunchObserver {
 public:
  virtual ~LaunchObserver() = default;
  // Before the work is queued on launch.stream, with what the launch derived for the profiler's
  // record and the thread policy.
  virtual void launched(const Launch& launch, const vdev::rt::TaskTag& tag,
                        TaskThreads threads) = 0;
  // Before the host work runs; host_run_ended when it ended (whole calls only: the scope of its
  // own accesses), on the same thread.
  virtual void host_run(const HostRun& run) = 0;
  virtual void host_run_ended(const HostRun& run) { (void)run; }
  // A captured graph was reset or destroyed: no launch replays `capture_id` again.
  virtual void capture_dropped(std::uint64_t capture_id) { (void)capture_id; }
};

namespace detail {
// The installed observers: an immutable array, replaced whole (never freed), or nullptr.
struct LaunchObservers {
  std::size_t count;
  LaunchObserver* observers[1];  // `count` of them

  LaunchObserver* const* begin() const { return observers; }
  LaunchObserver* const* end() const { return observers + count; }
};
VDEV_BACKEND_API extern std::atomic<const LaunchObservers*> g_launch_observers;
inline const LaunchObservers* launch_observers_relaxed() noexcept {
  return g_launch_observers.load(std::memory_order_relaxed);
}
}  // namespace detail

// The installed observers, or nullptr: the hot path's one load.
inline const detail::LaunchObservers* launch_observers() noexcept {
  return detail::g_launch_observers.load(std::memory_order_acquire);
}

VDEV_BACKEND_API void add_launch_observer(LaunchObserver* observer);
VDEV_BACKEND_API void remove_launch_observer(LaunchObserver* observer);

// Tells the observers of a launch (the launch functions of task.h call it).
VDEV_BACKEND_API void observe_launch(const detail::LaunchObservers& observers, const Launch& launch,
                                     const vdev::rt::TaskTag& tag, TaskThreads threads);

// Tells the observers that a captured graph's capture will not be replayed again.
VDEV_BACKEND_API void observe_capture_dropped(std::uint64_t capture_id);

// Announces host work to the observers (the caller then does it). Not a whole call (HostRunScope).
VDEV_BACKEND_API void observe_host_run(const HostRun& run);

// Announces a whole call's host work for its extent: observers see it when the scope opens, and
// its end when it closes (the observers of the opening: a change meanwhile does not unbalance).
class VDEV_BACKEND_API HostRunScope {
 public:
  explicit HostRunScope(const HostRun& run);
  ~HostRunScope();
  HostRunScope(const HostRunScope&) = delete;
  HostRunScope& operator=(const HostRunScope&) = delete;

 private:
  HostRun run_;  // its uses' source, if derived, is the caller's and outlives the scope
  const detail::LaunchObservers* observers_;
};

}  // namespace vdev::backend
