#include "backend/testing/probes.h"

#include <ATen/core/CachingHostAllocator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <ATen/ops/mm.h>
#include <ATen/ops/ones.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <thread>

#include "backend/common/error_boundary.h"
#include "backend/common/task.h"
#include "backend/common/thread_policy.h"
#include "backend/common/vdev_device.h"
#include "backend/executor/express.h"
#include "backend/executor/out_kernel_layouts.h"
#include "backend/memory/memory_history.h"
#include "backend/sanitizer/settings.h"
#include "runtime/fault_injection.h"
#include "runtime/happens_before.h"
#include "runtime/machine_load.h"
#include "runtime/stream_registry.h"
#include "runtime/task_trace.h"

namespace vdev::backend::testing {
namespace {

const at::PrivateUse1HooksInterface& hooks() { return at::detail::getPrivateUse1Hooks(); }

}  // namespace

int guard_call(const std::string& method, const std::string& device) {
  const auto* impl = c10::impl::getDeviceGuardImpl(kVdev);
  const c10::Device d(device);
  if (method == "setDevice") {
    impl->setDevice(d);
    return impl->getDevice().index();
  }
  if (method == "exchangeDevice") return impl->exchangeDevice(d).index();
  if (method == "getStream") return impl->getStream(d).device_index();
  if (method == "getDefaultStream") return impl->getDefaultStream(d).device_index();
  if (method == "getDeviceCapability") {
    impl->getDeviceCapability(d);
    return d.index();
  }
  if (method == "exchangeStream") {
    return impl->exchangeStream(c10::Stream(c10::Stream::DEFAULT, d)).device_index();
  }
  if (method == "queryStream") {
    return impl->queryStream(c10::Stream(c10::Stream::DEFAULT, d)) ? 1 : 0;
  }
  TORCH_CHECK_VALUE(false, "guard_call: unknown method ", method);
}

int hooks_device_from_ptr(std::uintptr_t ptr) {
  return hooks().getDeviceFromPtr(reinterpret_cast<void*>(ptr)).index();
}
bool hooks_has_primary_context(int device) {
  return hooks().hasPrimaryContext(static_cast<c10::DeviceIndex>(device));
}
bool hooks_is_available() { return hooks().isAvailable(); }
int hooks_device_count() { return hooks().deviceCount(); }
int hooks_maybe_exchange_device(int device) {
  return hooks().maybeExchangeDevice(static_cast<c10::DeviceIndex>(device));
}

int worker_intra_op_threads(int device, std::uint64_t elements, std::int64_t stream_id,
                            bool host_waits) {
  vdev::rt::Stream& stream = VDEV_RT(stream_id < 0 ? vdev::rt::current_stream(device)
                                                   : vdev::rt::stream_from_id(device, stream_id));
  // The bound on the two waits below: a broken runtime fails, not hangs (not a timing check).
  static constexpr auto kBound = std::chrono::seconds(60);
  if (host_waits) {
    // Holds the stream until this thread waits for it (the synchronize below), so that the
    // probe starts while a host thread waits.
    queue_launch({.stream = stream, .name = "wait_for_a_host_waiter"}, [] {
      const auto end = std::chrono::steady_clock::now() + kBound;
      while (vdev::rt::host_waiters() == 0 && std::chrono::steady_clock::now() < end) {
        std::this_thread::yield();
      }
    });
  }
  struct Seen {
    std::atomic<int> threads{-1};
  };
  auto seen = std::make_shared<Seen>();
  queue_launch({.stream = stream, .name = "worker_intra_op_threads", .elements = elements},
               [seen] { seen->threads.store(at::get_num_threads(), std::memory_order_release); });
  if (!host_waits) {
    // Polls, without waiting for the device: every host thread runs while the probe starts.
    const auto end = std::chrono::steady_clock::now() + kBound;
    while (seen->threads.load(std::memory_order_acquire) < 0 &&
           std::chrono::steady_clock::now() < end) {
      std::this_thread::yield();
    }
  }
  VDEV_RT(stream.synchronize());
  return seen->threads.load(std::memory_order_acquire);
}

double hook_checks_ns(std::int64_t iterations) {
  int on = 0;
  const auto start = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < iterations; ++i) {
    on += vdev::rt::task_tracing();                                       // Stream::enqueue
    on += launch_observers() != nullptr;                                  // every launch
    on += poisoning() + poisoning();                                      // allocation and free
    on += memory_history_enabled() + memory_history_enabled();            // allocation and free
    on += vdev::rt::hb::tracking();                                       // synchronize, query
    on += vdev::rt::injected_fault_armed(vdev::rt::Fault::kDeviceAlloc);  // allocation
    asm volatile("" ::: "memory");  // each iteration loads every flag again
  }
  const auto end = std::chrono::steady_clock::now();
  TORCH_CHECK(on == 0, "hook_checks_ns: a tool is on; the figure is for the off path");
  return std::chrono::duration<double, std::nano>(end - start).count() /
         static_cast<double>(std::max<std::int64_t>(iterations, 1));
}

std::uint64_t express_calls() { return vdev::backend::express_calls_on_this_thread(); }
std::uint64_t express_misses() { return vdev::backend::express_misses_on_this_thread(); }

std::uint64_t out_layout_trials() { return vdev::backend::out_layout_trials(); }
std::uint64_t out_kernels_declined_for_layout() {
  return vdev::backend::out_kernels_declined_for_layout();
}

std::uint64_t host_team_releases() { return vdev::backend::host_team_releases(); }

void enqueue_cpu_busy(int device, std::int64_t stream_id, double seconds, const std::string& path) {
  vdev::rt::Stream& stream = VDEV_RT(vdev::rt::stream_from_id(device, stream_id));
  queue_launch({.stream = stream, .name = "cpu_busy"}, [seconds, path] {
    const at::Tensor a = at::ones({128, 128});
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) (void)at::mm(a, a);
    std::ofstream(path) << "done";
  });
}

void enqueue_warning(int device, std::int64_t stream_id, const std::string& message) {
  vdev::rt::Stream& stream = VDEV_RT(vdev::rt::stream_from_id(device, stream_id));
  queue_launch({.stream = stream, .name = "testing_warning"}, [message] { TORCH_WARN(message); });
}

bool host_record_event(std::uintptr_t ptr, int device, std::int64_t stream_id) {
  const c10::Stream stream(c10::Stream::UNSAFE,
                           c10::Device(kVdev, static_cast<c10::DeviceIndex>(device)), stream_id);
  return at::getHostAllocator(kVdev)->record_event(reinterpret_cast<void*>(ptr), nullptr, stream);
}

}  // namespace vdev::backend::testing
