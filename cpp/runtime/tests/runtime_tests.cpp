// Standalone tests of libvdevrt (no torch, no Python), built with -DVDEV_BUILD_TESTS=ON. Their
// purpose is the sanitizer builds: ASan/UBSan for the memory table, TSan for the thread-local
// device state and the concurrent allocator. Exit code 0 means every check passed.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/capture.h"
#include "runtime/config.h"
#include "runtime/device.h"
#include "runtime/device_assert.h"
#include "runtime/errors.h"
#include "runtime/event.h"
#include "runtime/fault_injection.h"
#include "runtime/happens_before.h"
#include "runtime/ipc.h"
#include "runtime/memory.h"
#include "runtime/stream_registry.h"
#include "runtime/task_trace.h"
#include "runtime/testing/gate.h"
#include "runtime/tests/expect.h"

namespace rt = vdev::rt;

template <typename E, typename F>
static bool throws(F&& f, const char* needle) {
  try {
    f();
  } catch (const E& e) {
    return std::string(e.what()).find(needle) != std::string::npos;
  } catch (...) {
    return false;
  }
  return false;
}

static void test_config_parsers() {
  EXPECT(rt::parse_device_count("3", "X") == 3);
  EXPECT(throws<std::invalid_argument>([] { rt::parse_device_count("0", "X"); }, "X='0'"));
  EXPECT(throws<std::invalid_argument>([] { rt::parse_device_count("65", "X"); }, "1..64"));
  EXPECT(rt::parse_memory_size("2GiB", "M") == (std::size_t{2} << 30));
  EXPECT(rt::parse_memory_size("5k", "M") == 5 * 1024);
  EXPECT(throws<std::invalid_argument>([] { rt::parse_memory_size("3Q", "M"); }, "M='3Q'"));
  EXPECT(throws<std::invalid_argument>([] { rt::parse_memory_size("99999999999T", "M"); }, "M="));
}

static void test_device_registry() {
  EXPECT(rt::device_count() == 2);
  EXPECT(rt::get_device() == 0);
  EXPECT(rt::exchange_device(1) == 0);
  EXPECT(rt::maybe_exchange_device(-1) == 1);
  EXPECT(rt::get_device() == 1);
  EXPECT(throws<std::out_of_range>([] { rt::set_device(2); }, "device index 2 out of range"));
  EXPECT(throws<std::invalid_argument>([] { rt::set_device(-1); }, "negative"));
  rt::unchecked_set_device(7);  // invalid: ignored, state stays valid
  EXPECT(rt::get_device() == 1);
  rt::set_device(0);
  EXPECT(rt::device_properties(1).name == "vdev virtual device 1");
}

// Each thread flips its own current device many times; none may see another's value.
static void test_current_device_is_thread_local() {
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &wrong] {
      for (int i = 0; i < 20000; ++i) {
        const int want = (t + i) % 2;
        rt::set_device(want);
        if (rt::get_device() != want) ++wrong;
        if (rt::exchange_device(1 - want) != want) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT(wrong.load() == 0);
  EXPECT(rt::get_device() == 0);  // this thread never changed
}

static void test_memory_accounting_and_copies() {
  const std::size_t before = rt::memory_stats(1).allocated;
  void* p = rt::device_malloc(1, 1000);
  EXPECT(p != nullptr);
  EXPECT(reinterpret_cast<std::uintptr_t>(p) % rt::kDeviceAlignment == 0);
  EXPECT(rt::memory_stats(1).allocated == before + 1024);
  EXPECT(rt::pointer_device(static_cast<char*>(p) + 999) == 1);
  // Device addresses are not host addresses: kernels reach the bytes through another view.
  EXPECT(rt::device_memory_protected(1));
  EXPECT(rt::kernel_address(p) != p);
  EXPECT(rt::pointer_device(rt::kernel_address(p)) == -1);
  std::vector<unsigned char> in(1000), out(1000);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(i * 7);
  rt::memcpy_host_to_device(p, in.data(), in.size());
  void* q = rt::device_malloc(0, 1000);
  rt::memcpy_device_to_device(q, p, 1000);
  rt::memcpy_device_to_host(out.data(), q, out.size());
  EXPECT(std::memcmp(in.data(), out.data(), in.size()) == 0);
  rt::device_free(p);
  rt::device_free(q);
  rt::device_free(reinterpret_cast<void*>(0x1234));  // not ours: ignored
  EXPECT(rt::memory_stats(1).allocated == before);
  EXPECT(rt::device_malloc(0, 0) == nullptr);
  const std::size_t cap = rt::config().device_memory;
  EXPECT(throws<rt::OutOfMemory>([cap] { rt::device_malloc(0, cap + 1); }, "out of memory"));
  EXPECT(rt::memory_stats(0).num_ooms >= 1);
}

// Concurrent allocate / look up / free from several threads: the table and the statistics stay
// consistent (TSan checks the locking; the final count checks the accounting).
static void test_concurrent_allocation() {
  const std::size_t before = rt::memory_stats(0).allocated + rt::memory_stats(1).allocated;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &wrong] {
      std::vector<void*> mine;
      for (int i = 0; i < 2000; ++i) {
        const int dev = (t + i) % 2;
        void* p = rt::device_malloc(dev, 64 + static_cast<std::size_t>(i % 7) * 300);
        if (rt::pointer_device(p) != dev) ++wrong;
        mine.push_back(p);
        if (mine.size() > 16) {
          rt::device_free(mine.front());
          mine.erase(mine.begin());
        }
      }
      for (void* p : mine) rt::device_free(p);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT(wrong.load() == 0);
  EXPECT(rt::memory_stats(0).allocated + rt::memory_stats(1).allocated == before);
}

static void test_stream_runs_tasks_in_order() {
  rt::Stream& s = rt::new_stream(0, 0);
  auto log = std::make_shared<rt::testing::Log>();
  for (int i = 0; i < 10000; ++i) rt::testing::enqueue_log(s, log, i);
  s.synchronize();
  EXPECT(s.query());
  const auto v = log->values();
  bool ordered = v.size() == 10000;
  for (std::size_t i = 0; ordered && i < v.size(); ++i) ordered = v[i] == static_cast<int>(i);
  EXPECT(ordered);
}

static void test_gate_holds_work_and_events() {
  rt::Stream& s = rt::new_stream(1, 0);
  auto gate = std::make_shared<rt::testing::Gate>();
  auto log = std::make_shared<rt::testing::Log>();
  rt::testing::enqueue_gate(s, gate);
  rt::testing::enqueue_log(s, log, 1);
  rt::Event e(/*timing=*/true);
  e.record(s);
  EXPECT(!s.query());
  EXPECT(!e.query());
  EXPECT(log->values().empty());
  EXPECT(e.device() == 1);
  rt::Stream& other = rt::new_stream(0, 0);
  EXPECT(throws<std::invalid_argument>([&] { e.record(other); }, "belongs to vdev:1"));
  gate->open();
  e.synchronize();
  EXPECT(e.query());
  s.synchronize();
  EXPECT(s.query() && log->values().size() == 1);
}

static void test_errors_surface_once_and_stream_stays_usable() {
  rt::Stream& s = rt::new_stream(0, 0);
  auto gate = std::make_shared<rt::testing::Gate>();
  rt::testing::enqueue_gate(s, gate);  // queue everything before the failure can run
  rt::testing::enqueue_failure(s, "boom");
  auto log = std::make_shared<rt::testing::Log>();
  rt::testing::enqueue_log(s, log, 7);  // later tasks still run
  gate->open();
  EXPECT(throws<std::runtime_error>([&] { s.synchronize(); }, "[test_failure] boom (on vdev:0"));
  s.synchronize();  // reported once
  EXPECT(log->values().size() == 1);
  rt::testing::enqueue_failure(s, "second");
  while (!s.query()) std::this_thread::yield();
  EXPECT(throws<std::runtime_error>([&] { rt::testing::enqueue_log(s, log, 8); }, "second"));
  rt::testing::enqueue_log(s, log, 9);  // usable again
  s.synchronize();
  EXPECT(log->values().back() == 9 && log->values().size() == 2);
}

static void test_wait_event_orders_streams_and_carries_errors() {
  rt::Stream& a = rt::new_stream(0, 0);
  rt::Stream& b = rt::new_stream(0, 0);
  auto gate = std::make_shared<rt::testing::Gate>();
  auto log = std::make_shared<rt::testing::Log>();
  rt::testing::enqueue_gate(a, gate);
  rt::testing::enqueue_log(a, log, 1);
  rt::Event e(false);
  e.record(a);
  e.block(b);
  rt::testing::enqueue_log(b, log, 2);
  EXPECT(!b.query());
  gate->open();
  b.synchronize();
  EXPECT(log->values() == std::vector<std::int64_t>({1, 2}));

  auto gate2 = std::make_shared<rt::testing::Gate>();
  rt::testing::enqueue_gate(a, gate2);
  rt::testing::enqueue_failure(a, "upstream");
  rt::Event carrier(false);
  carrier.record(a);
  carrier.block(b);
  gate2->open();
  EXPECT(throws<std::runtime_error>([&] { b.synchronize(); }, "upstream"));
  EXPECT(throws<std::runtime_error>([&] { carrier.synchronize(); }, "upstream"));
  EXPECT(throws<std::runtime_error>([&] { a.synchronize(); }, "upstream"));
}

static void test_elapsed_time_rules() {
  rt::Stream& s = rt::new_stream(0, 0);
  rt::Event start(true), end(true), untimed(false), never(true);
  start.record(s);
  end.record(s);
  untimed.record(s);
  s.synchronize();
  EXPECT(start.elapsed_ms(end) >= 0.0);
  EXPECT(throws<std::invalid_argument>([&] { start.elapsed_ms(untimed); }, "enable_timing"));
  EXPECT(throws<std::invalid_argument>([&] { start.elapsed_ms(never); }, "recorded"));
}

// Whether `values`, logged by `threads` threads as thread * 1000000 + i (i = 0, 1, ... per thread),
// hold each thread's values in its own order.
static bool in_order_per_thread(const std::vector<std::int64_t>& values, int threads) {
  std::vector<int> next(static_cast<std::size_t>(threads), 0);
  for (auto x : values) {
    const auto t = static_cast<std::size_t>(x / 1000000);
    if (t >= next.size() || x % 1000000 != next[t]++) return false;
  }
  return true;
}

// 8 host threads enqueue on one shared stream and on private streams: nothing lost or reordered.
static void test_concurrent_enqueue_stress() {
  rt::Stream& shared = rt::new_stream(1, 0);
  auto shared_log = std::make_shared<rt::testing::Log>();
  constexpr int kThreads = 8, kTasks = 5000;
  std::vector<std::shared_ptr<rt::testing::Log>> private_logs;
  std::vector<rt::Stream*> private_streams;
  for (int t = 0; t < kThreads; ++t) {
    private_logs.push_back(std::make_shared<rt::testing::Log>());
    private_streams.push_back(&rt::new_stream(t % 2, 0));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kTasks; ++i) {
        rt::testing::enqueue_log(shared, shared_log, t * 1000000 + i);
        rt::testing::enqueue_log(*private_streams[t], private_logs[t], i);
      }
    });
  }
  for (auto& th : threads) th.join();
  rt::synchronize_device(0);
  rt::synchronize_device(1);
  const auto v = shared_log->values();
  EXPECT(v.size() == static_cast<std::size_t>(kThreads * kTasks));
  EXPECT(in_order_per_thread(v, kThreads));
  for (int t = 0; t < kThreads; ++t) EXPECT(private_logs[t]->values().size() == kTasks);
}

// Workers that exit when idle and start again at the next enqueue (runtime/stream.h: the exit is
// decided under the producers' lock). The idle wait is shortened to 1 ms. One thread queues bursts
// and waits, between them, until the worker has gone (so workers provably exit and restart); three
// others queue at random small intervals, racing the exits. Nothing is lost or reordered.
static void test_worker_exit_and_restart_race() {
  rt::set_worker_idle_exit(std::chrono::milliseconds(1));
  rt::Stream& s = rt::new_stream(0, 0);
  auto log = std::make_shared<rt::testing::Log>();
  constexpr int kThreads = 4, kBursts = 40, kPerBurst = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::uint32_t random = 12345u + static_cast<std::uint32_t>(t);
      for (int b = 0; b < kBursts; ++b) {
        for (int k = 0; k < kPerBurst; ++k) {
          rt::testing::enqueue_log(s, log, t * 1000000 + b * kPerBurst + k);
        }
        if (t == 0) {
          while (s.worker_running()) std::this_thread::yield();
        } else {
          random = random * 1664525u + 1013904223u;
          std::this_thread::sleep_for(std::chrono::microseconds(random % 2000));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  s.synchronize();
  rt::set_worker_idle_exit(rt::kWorkerIdleExit);
  const auto v = log->values();
  EXPECT(v.size() == static_cast<std::size_t>(kThreads * kBursts * kPerBurst));
  EXPECT(in_order_per_thread(v, kThreads));
  EXPECT(s.worker_starts() >= static_cast<std::uint64_t>(kBursts));  // thread 0 saw each exit
}

// Task records (runtime/task_trace.h): tasks queued from several threads while an observer is
// installed are each reported once, with start >= launch and end >= start, their tag, stream and
// the queuing thread's correlation; the observer is swapped out while tasks run (no call after
// set_task_observer returns); tasks queued with no observer are not reported.
static void test_task_records_under_concurrency() {
  struct Collector final : rt::TaskObserver {
    std::mutex mu;
    std::vector<rt::TaskRecord> tasks;
    std::atomic<bool> closed{false};
    std::atomic<int> late{0};
    void on_task(const rt::TaskRecord& r) noexcept override {
      if (closed.load()) ++late;
      std::lock_guard<std::mutex> lock(mu);
      tasks.push_back(r);
    }
    void on_host_call(const rt::HostCallRecord&) noexcept override {}
  };
  Collector c;
  EXPECT(!rt::task_tracing());
  rt::testing::enqueue_log(rt::default_stream(0), std::make_shared<rt::testing::Log>(), 0);
  rt::synchronize_device(0);  // queued before: never reported
  rt::set_task_observer(&c);
  EXPECT(rt::task_tracing());
  constexpr int kThreads = 4, kTasks = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      rt::set_launch_correlation(100 + t);
      rt::Stream& s = rt::new_stream(t % 2, 0);
      auto log = std::make_shared<rt::testing::Log>();
      for (int i = 0; i < kTasks; ++i) {
        s.enqueue("traced", [log, i] { log->append(i); }, rt::TaskTag{rt::TaskKind::kMemset, 8});
      }
      s.synchronize();
      rt::set_launch_correlation(0);
    });
  }
  for (auto& th : threads) th.join();
  // Swapped out while another stream still runs tasks: none reaches it afterwards.
  rt::Stream& busy = rt::new_stream(0, 0);
  auto log = std::make_shared<rt::testing::Log>();
  for (int i = 0; i < 2000; ++i) busy.enqueue("late", [log, i] { log->append(i); });
  rt::set_task_observer(nullptr);
  c.closed.store(true);
  busy.synchronize();
  EXPECT(!rt::task_tracing());
  EXPECT(c.late.load() == 0);
  std::lock_guard<std::mutex> lock(c.mu);
  int traced = 0;
  for (const rt::TaskRecord& r : c.tasks) {
    EXPECT(r.start_ns >= r.launch_ns && r.end_ns >= r.start_ns && r.launch_end_ns >= r.launch_ns);
    EXPECT(r.launch_id != 0);
    if (std::strcmp(r.name, "traced") != 0) continue;
    ++traced;
    EXPECT(r.tag.kind == rt::TaskKind::kMemset && r.tag.bytes == 8);
    EXPECT(r.correlation >= 100 && r.correlation < 100 + kThreads);
    EXPECT(r.device == static_cast<int>((r.correlation - 100) % 2));
  }
  EXPECT(traced == kThreads * kTasks);
}

static void test_async_copies_and_current_stream() {
  rt::Stream& s = rt::current_stream(0);
  EXPECT(&s == &rt::default_stream(0));
  rt::Stream& p = rt::pool_stream(0, true);
  EXPECT(p.priority() == rt::kHighestStreamPriority && p.id() > rt::kStreamsPerPool);
  EXPECT(&rt::exchange_current_stream(p) == &s);
  EXPECT(&rt::current_stream(0) == &p);
  EXPECT(&rt::stream_from_id(0, p.id()) == &p);
  EXPECT(throws<std::invalid_argument>([] { rt::stream_from_id(0, 999); }, "unknown vdev stream"));
  std::vector<int> in(4096), out(4096, 0);
  for (int i = 0; i < 4096; ++i) in[i] = i * 3;
  void* d = rt::device_malloc(0, sizeof(int) * 4096);
  auto gate = std::make_shared<rt::testing::Gate>();
  rt::testing::enqueue_gate(p, gate);
  rt::memcpy_async(p, d, in.data(), sizeof(int) * 4096, rt::CopyKind::HostToDevice);
  rt::memcpy_async(p, out.data(), d, sizeof(int) * 4096, rt::CopyKind::DeviceToHost);
  EXPECT(out[4095] == 0);  // still behind the gate
  gate->open();
  p.synchronize();
  EXPECT(out == in);
  rt::device_free(d);
  rt::exchange_current_stream(s);
}

// IPC within one process (another process maps the same way; tests/process/test_sharing.py runs
// two): a memory handle opened again is a second device address over the same bytes, counted
// as allocated until closed; a slot's signal orders a waiting stream after the sender's stream.
static void test_ipc_memory_and_slots() {
  const std::size_t before = rt::memory_stats(0).allocated;
  void* p = rt::device_malloc(0, 10000);
  std::vector<unsigned char> in(10000), out(10000);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(i * 13);
  rt::memcpy_host_to_device(p, in.data(), in.size());
  const rt::IpcMemHandle h = rt::ipc_get_mem_handle(static_cast<char*>(p) + 300);
  void* q = rt::ipc_open_mem_handle(0, h.fd, h.offset, 5000);
  EXPECT(q != static_cast<char*>(p) + 300 && rt::pointer_device(q) == 0);
  rt::memcpy_device_to_host(out.data(), q, 5000);
  EXPECT(std::memcmp(out.data(), in.data() + 300, 5000) == 0);
  const unsigned char mark = 0xAB;
  rt::memcpy_host_to_device(q, &mark, 1);  // seen through the first address too
  unsigned char seen = 0;
  rt::memcpy_device_to_host(&seen, static_cast<char*>(p) + 300, 1);
  EXPECT(seen == mark);
  // The opened range names the same bytes: opened again, it maps the same memory.
  const rt::IpcMemHandle again = rt::ipc_get_mem_handle(q);
  void* r = rt::ipc_open_mem_handle(0, again.fd, again.offset, 1);
  rt::memcpy_device_to_host(&seen, r, 1);
  EXPECT(seen == mark);
  EXPECT(rt::memory_stats(0).allocated > before + 10240);
  rt::device_free(q);  // not a device_malloc block: ignored
  rt::ipc_close_mem_handle(r);
  rt::ipc_close_mem_handle(static_cast<char*>(q) + 10);  // any address inside the range
  rt::device_free(p);
  EXPECT(rt::memory_stats(0).allocated == before);
  EXPECT(throws<std::invalid_argument>([&] { rt::ipc_get_mem_handle(&before); }, "not a vdev"));

  rt::Stream& sender = rt::new_stream(0, 0);
  rt::Stream& receiver = rt::new_stream(1, 0);
  auto gate = std::make_shared<rt::testing::Gate>();
  auto log = std::make_shared<rt::testing::Log>();
  rt::testing::enqueue_gate(sender, gate);
  std::unique_ptr<rt::IpcSentSlot> slot = rt::IpcSentSlot::create(sender);
  EXPECT(slot->refs() == 1 && !slot->released());
  rt::IpcReceivedSlot received(slot->fd(), slot->index());
  received.stream_wait(receiver, slot->generation(), static_cast<int>(getpid()));
  rt::testing::enqueue_log(receiver, log, 7);
  received.release();
  received.release();  // counts once
  EXPECT(slot->refs() == 0);
  EXPECT(!slot->released());  // the signal is still held by the gate
  EXPECT(!receiver.query() && log->values().empty());
  gate->open();
  receiver.synchronize();
  EXPECT(log->values() == std::vector<std::int64_t>{7});
  sender.synchronize();
  EXPECT(slot->released());
  const std::uint32_t index = slot->index(), generation = slot->generation();
  slot.reset();  // back to the table: the next slot reuses it with a later generation
  std::unique_ptr<rt::IpcSentSlot> next = rt::IpcSentSlot::create(sender);
  EXPECT(next->index() == index && next->generation() == generation + 1);
  sender.synchronize();
  EXPECT(throws<std::invalid_argument>(
      [&] { rt::IpcReceivedSlot(next->fd(), rt::kIpcSlotsPerTable); }, "out of range"));
}

// Capture records instead of running, joins side streams through events, checks joins at the
// end, and is invalidated by a synchronize; several threads capture and queue at once (TSan).
static void test_capture_records_joins_and_invalidates() {
  rt::Stream& origin = rt::new_stream(0, 0);
  rt::Stream& side = rt::new_stream(0, 0);
  auto log = std::make_shared<rt::testing::Log>();
  auto c = rt::begin_capture(origin, rt::CaptureMode::kGlobal);
  EXPECT(origin.capture_id() == rt::capture_id(*c) && side.capture_id() == 0);
  rt::testing::enqueue_log(origin, log, 1);
  rt::Event fork(false), join(false);
  fork.record(origin);
  fork.block(side);  // side joins
  EXPECT(side.capture_id() == rt::capture_id(*c));
  rt::testing::enqueue_log(side, log, 2);
  join.record(side);
  join.block(origin);
  std::vector<rt::CapturedTask> tasks = rt::end_capture(*c, origin);
  EXPECT(origin.capture_id() == 0 && side.capture_id() == 0);
  EXPECT(log->values().empty() && tasks.size() == 2);
  for (auto& t : tasks) t.fn();
  for (auto& t : tasks) t.fn();  // replayable
  EXPECT(log->values() == std::vector<std::int64_t>({1, 2, 1, 2}));

  // Unjoined side stream.
  c = rt::begin_capture(origin, rt::CaptureMode::kGlobal);
  fork.record(origin);
  fork.block(side);
  rt::testing::enqueue_log(side, log, 3);
  EXPECT(throws<std::runtime_error>([&] { rt::end_capture(*c, origin); }, "not joined back"));
  EXPECT(side.capture_id() == 0);

  // Invalidated by a synchronize; queueing then fails; the stream works after capture_end.
  c = rt::begin_capture(origin, rt::CaptureMode::kGlobal);
  EXPECT(throws<std::runtime_error>([&] { origin.synchronize(); }, "is capturing a graph"));
  EXPECT(throws<std::runtime_error>([&] { rt::testing::enqueue_log(origin, log, 4); },
                                    "invalidated by an earlier error"));
  EXPECT(throws<std::runtime_error>([&] { rt::end_capture(*c, origin); }, "invalidated by"));
  rt::testing::enqueue_log(origin, log, 5);
  origin.synchronize();
  EXPECT(log->values().back() == 5);

  // Concurrent captures on several threads, each with its own streams, while another thread
  // checks permissions (relaxed captures permit it).
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      rt::Stream& s = rt::new_stream(1, 0);
      for (int i = 0; i < 50; ++i) {
        auto cap = rt::begin_capture(s, rt::CaptureMode::kRelaxed);
        auto l = std::make_shared<rt::testing::Log>();
        rt::testing::enqueue_log(s, l, i);
        rt::check_capture_permits("test");
        if (rt::end_capture(*cap, s).size() == 1) ok.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT(ok.load() == 200 && rt::active_captures() == 0);
}

static void test_config_parsers_of_injected_faults() {
  EXPECT(rt::parse_oom_after("0", "O") == 0);
  EXPECT(rt::parse_oom_after(" 12 ", "O") == 12);
  EXPECT(throws<std::invalid_argument>([] { rt::parse_oom_after("-1", "O"); }, "O='-1'"));
  EXPECT(throws<std::invalid_argument>([] { rt::parse_oom_after("2x", "O"); },
                                       "0..9223372036854775807"));
  const rt::DistFault f = rt::parse_dist_fault("1:3:hang", "D");
  EXPECT(f.rank == 1 && f.nth == 3 && f.mode == rt::DistFaultMode::kHang);
  EXPECT(rt::parse_dist_fault(" 0 : 1 : abort ", "D").mode == rt::DistFaultMode::kAbort);
  EXPECT(throws<std::invalid_argument>([] { rt::parse_dist_fault("1:0:abort", "D"); }, "N '0'"));
  EXPECT(throws<std::invalid_argument>([] { rt::parse_dist_fault("a:1:hang", "D"); }, "'a'"));
  EXPECT(throws<std::invalid_argument>([] { rt::parse_dist_fault("1:2:boom", "D"); }, "'boom'"));
  EXPECT(throws<std::invalid_argument>([] { rt::parse_dist_fault("1:2", "D"); }, "D='1:2'"));
}

// A countdown lets `after` operations pass and fails the next one, once; arming exchanges it;
// pending faults (inject_fault) add up with it. Threads racing through a countdown: exactly one
// operation fails.
static void test_fault_countdown_fails_exactly_one_operation() {
  using rt::Fault;
  const auto take = [] { return rt::take_injected_fault(Fault::kCollective); };
  EXPECT(!take());
  EXPECT(rt::arm_fault_after(Fault::kCollective, 2) == -1);
  EXPECT(!take());
  EXPECT(!take());
  EXPECT(take());
  EXPECT(!take());
  EXPECT(rt::arm_fault_after(Fault::kCollective, -1) == -1);  // fired: disarmed
  rt::arm_fault_after(Fault::kCollective, 5);
  EXPECT(!take());
  EXPECT(rt::arm_fault_after(Fault::kCollective, -1) == 4);  // what is left, for a scope to restore
  EXPECT(!take());
  rt::inject_fault(Fault::kCollective, 1);
  rt::arm_fault_after(Fault::kCollective, 1);
  EXPECT(take());  // the pending fault (the countdown's one operation passes it)
  EXPECT(take());  // the countdown
  EXPECT(!take());
  EXPECT(!rt::take_injected_fault(Fault::kDeviceAlloc));  // points are independent

  rt::arm_fault_after(Fault::kCollective, 5000);
  std::atomic<int> failed{0}, passed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2500; ++i) (take() ? failed : passed).fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT(failed.load() == 1 && passed.load() == 9999);
  EXPECT(rt::arm_fault_after(Fault::kCollective, -1) == -1);
}

// The stream sanitizer's vector clocks: stream order, event record and wait, synchronize, and a
// true query order work; concurrent queueing threads keep the clocks consistent (TSan build).
void test_happens_before_edges() {
  namespace hb = vdev::rt::hb;
  hb::set_tracking(true);
  vdev::rt::Stream& a = vdev::rt::new_stream(0, 0);
  vdev::rt::Stream& b = vdev::rt::new_stream(0, 0);
  hb::Clock ca, cb;
  const hb::Epoch first = hb::begin_stream_task(a, ca);
  hb::begin_stream_task(b, cb);
  EXPECT(!hb::ordered_before(first, cb));  // nothing orders b after a
  const hb::Epoch second = hb::begin_stream_task(a, ca);
  EXPECT(hb::ordered_before(first, ca));  // stream order
  vdev::rt::Event e(false);
  e.record(a);
  e.block(b);
  hb::begin_stream_task(b, cb);
  EXPECT(hb::ordered_before(second, cb));  // an event wait
  const hb::Epoch third = hb::begin_stream_task(a, ca);
  EXPECT(!hb::known_to_host(third));
  a.synchronize();
  EXPECT(hb::known_to_host(third));  // the host waited for it
  hb::begin_stream_task(b, cb);
  EXPECT(hb::ordered_before(third, cb));  // whatever the host knew when b's task was queued
  const hb::Epoch fourth = hb::begin_stream_task(a, ca);
  a.enqueue("noop", [] {});
  while (!a.query()) {
  }
  EXPECT(hb::known_to_host(fourth));  // a true query
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      vdev::rt::Stream& s = vdev::rt::new_stream(0, 0);
      hb::Clock c;
      for (int i = 0; i < 200; ++i) {
        const hb::Epoch ep = hb::begin_stream_task(s, c);
        EXPECT(c[ep.slot] == ep.seq);
        vdev::rt::Event ev(false);
        ev.record(s);
        ev.block(a);
      }
      s.synchronize();
    });
  }
  for (auto& t : threads) t.join();
  a.synchronize();
  hb::set_tracking(false);
}

// Sticky device-side asserts (runtime/device_assert.h): a failure the classifier calls an assert
// makes every later enqueue and synchronize of its device throw, on every stream and thread, until
// cleared; other devices and other failures are not affected. Four threads race launches and
// synchronizes against the flag (TSan).
static bool classify_test_asserts(const char*, rt::ErrorKind, const char* what) {
  return std::strstr(what, "assert:") != nullptr;
}

static void test_device_asserts_are_sticky_on_every_stream() {
  rt::set_device_assert_classifier(&classify_test_asserts);
  rt::Stream& a = rt::new_stream(1, 0);
  rt::Stream& b = rt::new_stream(1, 0);
  auto log = std::make_shared<rt::testing::Log>();
  rt::testing::enqueue_failure(a, "boom");  // not an assert: raised once, nothing lasts
  EXPECT(throws<std::runtime_error>([&] { a.synchronize(); }, "[test_failure] boom"));
  EXPECT(!rt::device_asserted(1));
  rt::testing::enqueue_failure(a, "assert: bad index");
  EXPECT(throws<rt::DeviceAssertFailure>(
      [&] { a.synchronize(); }, "device-side assert triggered: [test_failure] assert: bad index"));
  EXPECT(rt::device_asserted(1) && !rt::device_asserted(0));
  std::atomic<int> refused{0};
  constexpr int kThreads = 4, kTries = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      rt::Stream& s = t % 2 == 0 ? a : b;
      for (int i = 0; i < kTries; ++i) {
        const bool launch = i % 2 == 0;
        if (throws<rt::DeviceAssertFailure>(
                [&] {
                  if (launch) {
                    rt::testing::enqueue_log(s, log, i);
                  } else {
                    s.synchronize();
                  }
                },
                "unusable since [test_failure] assert: bad index")) {
          ++refused;
        }
        (void)rt::device_assert_failure(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT(refused.load() == kThreads * kTries);
  EXPECT(log->values().empty());
  EXPECT(throws<rt::DeviceAssertFailure>([] { rt::synchronize_device(1); }, "unusable since"));
  rt::Stream& other = rt::new_stream(0, 0);  // another device works
  rt::testing::enqueue_log(other, log, 1);
  other.synchronize();
  const std::optional<std::string> failure = rt::clear_device_assert(1);
  EXPECT(failure && failure->find("assert: bad index") != std::string::npos);
  rt::testing::enqueue_log(b, log, 2);  // usable again
  rt::synchronize_device(1);
  EXPECT(log->values().size() == 2);
  rt::set_device_assert_classifier(nullptr);
}

int main() {
  setenv("VDEV_DEVICE_COUNT", "2", 1);
  setenv("VDEV_DEVICE_MEMORY", "64MiB", 1);
  test_config_parsers();
  test_config_parsers_of_injected_faults();
  test_fault_countdown_fails_exactly_one_operation();
  test_device_registry();
  test_current_device_is_thread_local();
  test_memory_accounting_and_copies();
  test_concurrent_allocation();
  test_stream_runs_tasks_in_order();
  test_happens_before_edges();
  test_gate_holds_work_and_events();
  test_errors_surface_once_and_stream_stays_usable();
  test_device_asserts_are_sticky_on_every_stream();
  test_wait_event_orders_streams_and_carries_errors();
  test_elapsed_time_rules();
  test_concurrent_enqueue_stress();
  test_worker_exit_and_restart_race();
  test_task_records_under_concurrency();
  test_async_copies_and_current_stream();
  test_ipc_memory_and_slots();
  test_capture_records_joins_and_invalidates();
  return report();
}
