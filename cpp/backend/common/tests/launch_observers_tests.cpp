// Stress test of the launch observers (backend/common/launch.h), built with the sanitizers like the
// task blocks' (VDEV_BUILD_CACHE_TESTS): two threads install and remove observers while four
// announce host runs, whole-call scopes and dropped captures. Each observer counts what it saw; a
// whole call's end must reach the observers its start reached (the scope keeps the set it loaded),
// and no observer array may be read after it was freed (they never are). TSan sees the loads.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "backend/common/launch.h"

namespace vb = vdev::backend;

namespace {

class Counting final : public vb::LaunchObserver {
 public:
  void launched(const vb::Launch&, const vdev::rt::TaskTag&, vb::TaskThreads) override {}
  void host_run(const vb::HostRun& run) override {
    runs.fetch_add(1, std::memory_order_relaxed);
    if (run.whole_call) open.fetch_add(1, std::memory_order_relaxed);
  }
  void host_run_ended(const vb::HostRun& run) override {
    if (run.whole_call) open.fetch_sub(1, std::memory_order_relaxed);
  }
  void capture_dropped(std::uint64_t) override { drops.fetch_add(1, std::memory_order_relaxed); }

  std::atomic<long> runs{0}, drops{0}, open{0};
};

}  // namespace

int main() {
  constexpr int kObservers = 6, kRounds = 5000;
  static Counting observers[kObservers];  // observers live until exit (launch.h)
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; !done.load(); ++i) {
        Counting* o = &observers[(i + t * 3) % kObservers];
        vb::add_launch_observer(o);
        vb::add_launch_observer(o);  // a second add of the same observer changes nothing
        vb::remove_launch_observer(&observers[(i + 1 + t * 3) % kObservers]);
      }
    });
  }
  std::vector<std::thread> announcers;
  for (int t = 0; t < 4; ++t) {
    announcers.emplace_back([] {
      for (int i = 0; i < kRounds; ++i) {
        vb::observe_host_run(vb::HostRun{"host"});
        {
          const vb::HostRunScope whole(vb::HostRun{"whole"});
        }
        vb::observe_capture_dropped(static_cast<std::uint64_t>(i + 1));
      }
    });
  }
  for (auto& a : announcers) a.join();
  done.store(true);
  for (auto& t : threads) t.join();
  long seen = 0;
  for (Counting& o : observers) {
    if (o.open.load() != 0) {
      std::printf("FAIL: a whole call's end missed an observer its start reached\n");
      return 1;
    }
    seen += o.runs.load() + o.drops.load();
  }
  for (Counting& o : observers) vb::remove_launch_observer(&o);
  if (vb::launch_observers() != nullptr) {
    std::printf("FAIL: observers left after every one was removed\n");
    return 1;
  }
  std::printf("ok: %ld announcements seen\n", seen);
  return 0;
}
