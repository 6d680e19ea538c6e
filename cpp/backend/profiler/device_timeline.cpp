#include "backend/profiler/device_timeline.h"

#include <atomic>
#include <utility>

namespace vdev::backend {
namespace {

// The calling thread's stack of host operators, of the session `generation`.
struct CorrelationStack {
  std::uint64_t generation = 0;
  std::vector<std::uint64_t> ids;
};
thread_local CorrelationStack tls_stack;

std::atomic<std::uint64_t> g_generation{0};

}  // namespace

DeviceTimeline& DeviceTimeline::instance() {
  static DeviceTimeline* t = new DeviceTimeline;  // leaked: workers may report during exit
  return *t;
}

void DeviceTimeline::start() {
  {
    const std::lock_guard<std::mutex> lock(mu_);
    records_ = Records{};
  }
  g_generation.fetch_add(1, std::memory_order_relaxed);  // earlier stacks are stale
  vdev::rt::set_task_observer(this);
}

void DeviceTimeline::stop() { vdev::rt::set_task_observer(nullptr); }

DeviceTimeline::Records DeviceTimeline::take() {
  const std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(records_, Records{});
}

void DeviceTimeline::push_correlation(std::uint64_t id) {
  CorrelationStack& s = tls_stack;
  const std::uint64_t generation = g_generation.load(std::memory_order_relaxed);
  if (s.generation != generation) {  // pushed in an earlier session and never popped
    s.ids.clear();
    s.generation = generation;
  }
  s.ids.push_back(id);
  vdev::rt::set_launch_correlation(id);
}

void DeviceTimeline::pop_correlation() {
  CorrelationStack& s = tls_stack;
  if (s.generation != g_generation.load(std::memory_order_relaxed)) {
    s.ids.clear();  // pushed in an earlier session: nothing of this one to pop
    s.generation = g_generation.load(std::memory_order_relaxed);
  } else if (!s.ids.empty()) {
    s.ids.pop_back();  // an operator that began before the session has no push to pop
  }
  vdev::rt::set_launch_correlation(s.ids.empty() ? 0 : s.ids.back());
}

void DeviceTimeline::on_task(const vdev::rt::TaskRecord& record) noexcept {
  try {
    const std::lock_guard<std::mutex> lock(mu_);
    records_.tasks.push_back(record);
  } catch (...) {  // out of memory: the activity is missing from the trace, nothing else
  }
}

void DeviceTimeline::on_host_call(const vdev::rt::HostCallRecord& record) noexcept {
  try {
    const std::lock_guard<std::mutex> lock(mu_);
    records_.host_calls.push_back(record);
  } catch (...) {
  }
}

}  // namespace vdev::backend
