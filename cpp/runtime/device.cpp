#include "runtime/device.h"

#include <atomic>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "runtime/config.h"
#include "runtime/errors.h"

namespace vdev::rt {
namespace {

thread_local int tls_current_device = 0;
// device_count() once the configuration has loaded (it never changes then), 0 before: the check
// of a device index, made several times per queued operator, is then one load and a compare.
std::atomic<int> g_loaded_device_count{0};

const std::vector<DeviceProperties>& all_properties() {
  static const std::vector<DeviceProperties> props = [] {
    const Config& c = config();
    std::vector<DeviceProperties> v;
    v.reserve(static_cast<std::size_t>(c.device_count));
    const CapabilityProfile& p = c.profile;  // VDEV_PROFILE: a real device's name, capability, ...
    for (int i = 0; i < c.device_count; ++i) {
      std::string name =
          p.device_name.empty() ? "vdev virtual device " + std::to_string(i) : p.device_name;
      v.push_back(DeviceProperties{i, std::move(name), c.device_memory, p.major, p.minor,
                                   p.multi_processor_count});
    }
    return v;
  }();
  return props;
}

}  // namespace

int device_count() { return config().device_count; }

int device_count_noexcept() noexcept { return config_error() ? 0 : config().device_count; }

void check_device_index(int index, const char* fn) {
  const int known = g_loaded_device_count.load(std::memory_order_relaxed);
  if (static_cast<unsigned>(index) < static_cast<unsigned>(known)) return;
  const int n = device_count();  // loads the configuration, or throws its error
  g_loaded_device_count.store(n, std::memory_order_relaxed);
  if (index < 0) {
    fail<std::invalid_argument>(fn, "device index ", index, " is negative: ", n,
                                " vdev devices (0..", n - 1, ")");
  }
  if (index >= n) {
    fail<std::out_of_range>(fn, "device index ", index, " out of range: ", n, " vdev devices (0..",
                            n - 1, ")");
  }
}

int get_device() noexcept { return tls_current_device; }

void set_device(int index) {
  check_device_index(index, "set_device");
  tls_current_device = index;
}

int exchange_device(int index) {
  check_device_index(index, "exchange_device");
  const int prev = tls_current_device;
  tls_current_device = index;
  return prev;
}

int maybe_exchange_device(int index) {
  if (index == -1) return tls_current_device;
  check_device_index(index, "maybe_exchange_device");
  const int prev = tls_current_device;
  tls_current_device = index;
  return prev;
}

void unchecked_set_device(int index) noexcept {
  if (index >= 0 && index < device_count_noexcept()) tls_current_device = index;
}

const DeviceProperties& device_properties(int index) {
  check_device_index(index, "get_device_properties");
  return all_properties()[static_cast<std::size_t>(index)];
}

}  // namespace vdev::rt
