#include "backend/sanitizer/launch_checks.h"

#include "backend/common/task.h"
#include "backend/sanitizer/settings.h"
#include "backend/sanitizer/stream_sanitizer.h"

namespace vdev::backend {
namespace {

class SanitizerLaunchObserver final : public LaunchObserver {
 public:
  void launched(const Launch& launch, const vdev::rt::TaskTag& tag, TaskThreads threads) override {
    (void)tag;
    (void)threads;
    if (!sanitizing_accesses()) return;  // the flags changed after it was installed
    if (launch.replays_capture != 0) {
      // A replay's accesses are those its capture recorded, checked as one task of this stream.
      sanitize_replay(launch.stream, launch.replays_capture);
      return;
    }
    launch.uses.visit([&](c10::ArrayRef<TensorUse> uses) {
      sanitize_queued(launch.stream, launch.operation_name(), uses);
    });
  }

  void host_run(const HostRun& run) override {
    if (sanitizing_accesses()) {
      run.uses.visit([&](c10::ArrayRef<TensorUse> uses) {
        sanitize_host_access(intern_task_name(run.name), uses);
      });
    }
    // After its own check: the call's copies to reach CPU's kernel are its own. Unconditional, so
    // that host_run_ended balances it whatever the flags do meanwhile.
    if (run.whole_call) enter_checked_host_call();
  }

  void host_run_ended(const HostRun& run) override {
    if (run.whole_call) leave_checked_host_call();
  }

  void capture_dropped(std::uint64_t capture_id) override { forget_capture(capture_id); }
};

}  // namespace

LaunchObserver& sanitizer_launch_observer() {
  static auto* observer = new SanitizerLaunchObserver();  // never destroyed (launch.h)
  return *observer;
}

}  // namespace vdev::backend
