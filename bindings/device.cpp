#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <string>

#include "bindings/bindings.h"
#include "bindings/device_index.h"
#include "runtime/config.h"
#include "runtime/device.h"
#include "runtime/device_assert.h"
#include "runtime/errors.h"
#include "runtime/process.h"
#include "runtime/stream_registry.h"

namespace nb = nanobind;

namespace vdev::bindings {
namespace {

void set_device(nb::handle device) {
  bool is_integer = false;
  const int index = device_index_from_py(device, "set_device", /*allow_none=*/false, &is_integer);
  if (index == -1 && !is_integer) {
    rt::fail<std::invalid_argument>("set_device",
                                    "expected a vdev device with an index or an integer, got '",
                                    nb::cast<std::string>(nb::str(device)), "'");
  }
  rt::set_device(index);
}

}  // namespace

void bind_device(nb::module_& m) {
  m.def("_noop", [] {}, "Does nothing: the baseline for binding-call benchmarks.");
  m.def("_in_bad_fork", &rt::in_bad_fork,
        "True in a child forked after the vdev runtime was initialised.");
  m.def("_get_device_count", &rt::device_count,
        "Number of vdev devices; raises RuntimeError if VDEV_DEVICE_COUNT is malformed.");
  m.def("_is_available", [] { return rt::device_count_noexcept() > 0; });
  m.def(
      "_config_error", [] { return rt::config_error(); },
      "The configuration error message, or None.");
  m.def("_config_read", &rt::config_read,
        "Whether the runtime has read its VDEV_* variables yet (at the first device use).");
  m.def(
      "_parse_device_count",
      [](const std::string& text, const std::string& what) {
        return rt::parse_device_count(text, what.c_str());
      },
      nb::arg("text"), nb::arg("what"),
      "A device count as VDEV_DEVICE_COUNT takes it; ValueError naming `what` otherwise.");
  m.def(
      "_parse_memory_size",
      [](const std::string& text, const std::string& what) {
        return rt::parse_memory_size(text, what.c_str());
      },
      nb::arg("text"), nb::arg("what"),
      "A memory size as VDEV_DEVICE_MEMORY takes it (bytes); ValueError naming `what` otherwise.");
  m.def("_get_device", &rt::get_device, "The calling thread's current vdev device index.");
  m.def("_set_device", &set_device, nb::arg("device").none(),
        "Sets the calling thread's current vdev device (int, 'vdev:N' or torch.device).");
  m.def("_exchange_device", &rt::exchange_device, nb::arg("device"),
        "Sets the current device and returns the previous one.");
  m.def("_maybe_exchange_device", &rt::maybe_exchange_device, nb::arg("device"),
        "As _exchange_device, but -1 leaves the current device unchanged.");
  m.def(
      "_device_index",
      [](nb::handle device, const char* fn) -> std::optional<int> {
        bool is_integer = false;
        const int index = device_index_from_py(device, fn, /*allow_none=*/true, &is_integer);
        if (index == -1 && !is_integer) return std::nullopt;
        return index;
      },
      nb::arg("device").none(), nb::arg("fn"),
      "Index of an int / 'vdev:N' / torch.device / None; None when it names no index.");
  m.def(
      "_get_device_properties",
      [](int index) {
        const rt::DeviceProperties& p = rt::device_properties(index);
        return std::make_tuple(p.name, p.total_memory, p.major, p.minor, p.multi_processor_count);
      },
      nb::arg("device"), "(name, total_memory, major, minor, multi_processor_count)");
  m.def(
      "_profile",
      [] {
        const rt::CapabilityProfile& p = rt::config().profile;
        return std::make_tuple(p.id, p.bf16_emulated, p.unsupported_dtypes, p.missing_operators);
      },
      "VDEV_PROFILE, what the device is: (id, bf16_emulated, unsupported dtype names, missing "
      "operators); raises RuntimeError if the configuration is malformed.");
  m.def(
      "_device_threads", [] { return rt::config().device_threads; },
      "VDEV_DEVICE_THREADS: the most intra-op threads a stream worker runs a kernel with.");
  m.def(
      "_disable_leak_warnings", [] { nb::set_leak_warnings(false); },
      "Exit with daemon threads inside vdev calls: their objects are leaked on purpose.");
  m.def("_shutdown", &rt::shutdown_workers, nb::call_guard<nb::gil_scoped_release>(),
        "Process exit (runtime/process.h): stops the workers after their running tasks, "
        "abandons queued work and prints errors no synchronize reported. Registered with atexit.");
  m.def("_synchronize", &rt::synchronize_device, nb::arg("device"),
        nb::call_guard<nb::gil_scoped_release>(),
        "Waits for all work queued on every stream of the device.");
  m.def("_device_assert_failure", &rt::device_assert_failure, nb::arg("device"),
        "The failure that made the device unusable (runtime/device_assert.h), or None.");
  m.def("_clear_device_assert", &rt::clear_device_assert, nb::arg("device"),
        "Makes a device unusable after a device-side assert usable again (what CUDA cannot do: "
        "test isolation); returns the failure it had, or None.");
}

}  // namespace vdev::bindings
