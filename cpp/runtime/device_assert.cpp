#include "runtime/device_assert.h"

#include <array>
#include <atomic>
#include <mutex>

#include "runtime/config.h"

namespace vdev::rt {
namespace {

std::atomic<DeviceAssertClassifier> g_classifier{nullptr};

struct AssertedDevices {
  std::mutex mu;  // guards failure and the writes of detail::g_device_asserted
  std::array<std::string, kMaxDevices> failure;
};

AssertedDevices& devices() {
  static auto* d = new AssertedDevices;  // leaked: workers may report failures during exit
  return *d;
}

bool valid(int device) { return device >= 0 && device < kMaxDevices; }

bool sticky_asserts() noexcept {
  try {
    return config().sticky_asserts;
  } catch (...) {  // a malformed environment: config() reports it at the first real use
    return false;
  }
}

}  // namespace

namespace detail {
std::atomic<bool> g_device_asserted[kMaxDevices] = {};
}  // namespace detail

void set_device_assert_classifier(DeviceAssertClassifier classifier) noexcept {
  g_classifier.store(classifier, std::memory_order_release);
}

DeviceAssertClassifier device_assert_classifier() noexcept {
  return g_classifier.load(std::memory_order_acquire);
}

bool is_sticky_device_assert(const char* task, ErrorKind kind, const char* what) noexcept {
  if (kind != ErrorKind::kDeviceAssert) {
    const DeviceAssertClassifier classify = g_classifier.load(std::memory_order_acquire);
    if (classify == nullptr || !classify(task, kind, what)) return false;
  }
  return sticky_asserts();
}

bool note_task_failure(int device, const char* task, ErrorKind kind, const char* what,
                       const std::string& failure) noexcept {
  if (!valid(device) || !is_sticky_device_assert(task, kind, what)) return false;
  AssertedDevices& d = devices();
  std::lock_guard<std::mutex> lock(d.mu);
  if (!detail::g_device_asserted[device].load(std::memory_order_relaxed)) {
    try {
      d.failure[device] = failure;
    } catch (...) {  // out of memory: asserted without its message
    }
    detail::g_device_asserted[device].store(true, std::memory_order_release);
  }
  return true;
}

void throw_device_asserted(int device, const char* operation) {
  const std::string failure = device_assert_failure(device).value_or("");
  throw DeviceAssertFailure(detail::cat(
      "vdev error: device-side assert triggered (", operation, " on vdev:", device,
      "): the device is unusable since ", failure,
      "; every later operation on it fails, as on a CUDA device after a device-side assert, "
      "until the process ends (VDEV_STICKY_ASSERTS=0 lets vdev recover instead)"));
}

std::optional<std::string> device_assert_failure(int device) {
  if (!device_asserted(device)) return std::nullopt;
  AssertedDevices& d = devices();
  std::lock_guard<std::mutex> lock(d.mu);
  return d.failure[device];
}

std::optional<std::string> clear_device_assert(int device) {
  if (!valid(device)) return std::nullopt;
  AssertedDevices& d = devices();
  std::lock_guard<std::mutex> lock(d.mu);
  if (!detail::g_device_asserted[device].load(std::memory_order_relaxed)) return std::nullopt;
  detail::g_device_asserted[device].store(false, std::memory_order_release);
  std::string failure = std::move(d.failure[device]);
  d.failure[device].clear();
  return failure;
}

}  // namespace vdev::rt
