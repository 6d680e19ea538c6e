// Stream executor benchmarks (issue 3), run by benchmarks/bench_streams.py. Prints one JSON object.
//
//   round_trip     host enqueues an empty task and waits for it, vs. a naive hand-off written here
//                  (one worker, a mutex and two condition variables, both sides sleeping)
//   throughput     1,000,000 empty tasks enqueued on one stream, then one synchronize
//   idle_cpu       CPU time the process uses in 1 s of wall time after 64 streams have run work
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/stream_registry.h"

namespace rt = vdev::rt;
using Clock = std::chrono::steady_clock;

struct Stats {
  double min, median;
};

static Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v.front(), v[v.size() / 2]};
}

// The baseline: the simplest correct hand-off.
class NaiveHandoff {
 public:
  NaiveHandoff() : worker_([this] { loop(); }) {}
  ~NaiveHandoff() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    work_cv_.notify_one();
    worker_.join();
  }
  void round_trip() {
    std::unique_lock<std::mutex> lock(mu_);
    has_work_ = true;
    done_ = false;
    work_cv_.notify_one();
    done_cv_.wait(lock, [&] { return done_; });
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      work_cv_.wait(lock, [&] { return has_work_ || stop_; });
      if (stop_) return;
      has_work_ = false;
      done_ = true;  // the "task": nothing
      done_cv_.notify_one();
    }
  }
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  bool has_work_ = false, done_ = false, stop_ = false;
  std::thread worker_;
};

template <typename F>
static Stats per_call_us(F f, int calls, int repeats) {
  for (int i = 0; i < calls / 4; ++i) f();  // warm-up
  std::vector<double> v;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) f();
    v.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / calls);
  }
  return stats(v);
}

static double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

int main() {
  const int calls = 5000, repeats = 15;

  Stats naive;
  {
    NaiveHandoff h;
    naive = per_call_us([&] { h.round_trip(); }, calls, repeats);
  }
  rt::Stream& s = rt::new_stream(0, 0);
  const Stats vdev = per_call_us(
      [&] {
        s.enqueue("noop", [] {});
        s.synchronize();
      },
      calls, repeats);

  std::vector<double> rates;
  for (int r = 0; r < 5; ++r) {
    const int n = 1000000;
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) s.enqueue("noop", [] {});
    s.synchronize();
    rates.push_back(n / std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(rates.begin(), rates.end());

  std::vector<rt::Stream*> pool;
  for (int i = 0; i < 32; ++i) {
    pool.push_back(&rt::pool_stream(0, false));
    pool.push_back(&rt::pool_stream(0, true));
  }
  for (rt::Stream* p : pool) p->enqueue("noop", [] {});
  for (rt::Stream* p : pool) p->synchronize();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the bounded spins end
  const double cpu0 = cpu_seconds();
  const auto w0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double idle_cpu_ms = (cpu_seconds() - cpu0) * 1e3;
  const double wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - w0).count();

  std::printf(
      "{\"round_trip\": {\"naive_mutex_condvar_us\": {\"min\": %.3f, \"median\": %.3f}, "
      "\"vdev_enqueue_synchronize_us\": {\"min\": %.3f, \"median\": %.3f}, "
      "\"ratio_min\": %.3f, \"ratio_median\": %.3f}, "
      "\"throughput\": {\"tasks\": 1000000, \"tasks_per_s_min\": %.0f, "
      "\"tasks_per_s_median\": %.0f, \"tasks_per_s_max\": %.0f}, "
      "\"idle_cpu\": {\"streams\": %zu, \"wall_ms\": %.1f, \"cpu_ms\": %.3f}}\n",
      naive.min, naive.median, vdev.min, vdev.median, vdev.min / naive.min,
      vdev.median / naive.median, rates.front(), rates[rates.size() / 2], rates.back(), pool.size(),
      wall_ms, idle_cpu_ms);
  return 0;
}
