#include "backend/testing/launch_recorder.h"

#include <mutex>
#include <utility>

#include "backend/common/launch.h"

namespace vdev::backend::testing {
namespace {

void record_uses(const LaunchUses& uses, RecordedLaunch& r) {
  uses.visit([&](c10::ArrayRef<TensorUse> all) {
    for (const TensorUse& u : all) {
      const at::Tensor& t = *u.tensor;
      if (!t.defined()) continue;
      r.uses.emplace_back(reinterpret_cast<std::uintptr_t>(t.data_ptr()),
                          static_cast<std::uint64_t>(t.numel()) * t.element_size(),
                          static_cast<int>(u.access));
    }
  });
}

class Recorder final : public LaunchObserver {
 public:
  void launched(const Launch& launch, const vdev::rt::TaskTag& tag, TaskThreads threads) override {
    RecordedLaunch r{false,
                     launch.name,
                     launch.operation_name(),
                     launch.stream.device(),
                     launch.stream.id(),
                     static_cast<int>(tag.kind),
                     tag.bytes,
                     tag.elements,
                     launch.replays_capture,
                     threads.host_running,
                     threads.host_waiting,
                     false,
                     {}};
    record_uses(launch.uses, r);
    const std::lock_guard<std::mutex> lock(mu_);
    records_.push_back(std::move(r));
  }

  void host_run(const HostRun& run) override {
    RecordedLaunch r{true, run.name, run.name, -1, -1, 0, 0, 0, 0, 0, 0, run.whole_call, {}};
    record_uses(run.uses, r);
    const std::lock_guard<std::mutex> lock(mu_);
    records_.push_back(std::move(r));
  }

  std::vector<RecordedLaunch> take() {
    const std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(records_, {});
  }

 private:
  std::mutex mu_;
  std::vector<RecordedLaunch> records_;
};

Recorder& recorder() {
  static auto* r = new Recorder();  // never destroyed (launch.h)
  return *r;
}

}  // namespace

void start_recording_launches() {
  (void)recorder().take();
  add_launch_observer(&recorder());
}

std::vector<RecordedLaunch> stop_recording_launches() {
  remove_launch_observer(&recorder());
  return recorder().take();
}

std::tuple<int, int> policy_threads(int kind, std::uint64_t bytes, std::uint64_t elements) {
  const TaskThreads t = task_intra_op_threads(
      vdev::rt::TaskTag{static_cast<vdev::rt::TaskKind>(kind), bytes, elements});
  return {t.host_running, t.host_waiting};
}

}  // namespace vdev::backend::testing
