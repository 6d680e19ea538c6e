#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <string>

#include "backend/allocator.h"
#include "backend/guard.h"
#include "backend/host_allocator.h"
#include "bindings/bindings.h"
#include "runtime/config.h"
#include "runtime/device.h"
#include "runtime/errors.h"
#include "runtime/process.h"
#include "runtime/stream.h"

namespace nb = nanobind;

namespace vdev::bindings {
namespace {

// Parses "vdev" / "vdev:N". Returns -1 for "vdev" without an index.
int index_from_string(const std::string& s, const char* fn) {
  const std::string prefix = "vdev";
  if (s.compare(0, prefix.size(), prefix) != 0 ||
      (s.size() > prefix.size() && s[prefix.size()] != ':')) {
    rt::fail<std::invalid_argument>(fn, "expected a vdev device, got '", s, "'");
  }
  if (s.size() == prefix.size()) return -1;
  const std::string digits = s.substr(prefix.size() + 1);
  if (digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    rt::fail<std::invalid_argument>(fn, "invalid vdev device string '", s,
                                    "': expected 'vdev' or 'vdev:N'");
  }
  return std::stoi(digits);
}

// An int, a "vdev:N" string or a torch.device with type vdev -> index (-1 if no index was given).
int index_from_py(nb::handle obj, const char* fn) {
  PyObject* o = obj.ptr();
  if (PyLong_Check(o) && !PyBool_Check(o)) {
    const long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      rt::fail<std::out_of_range>(fn, "device index ", nb::str(obj).c_str(), " out of range");
    }
    if (v < INT32_MIN || v > INT32_MAX) {
      rt::fail<std::out_of_range>(fn, "device index ", v, " out of range");
    }
    return static_cast<int>(v);
  }
  if (PyUnicode_Check(o)) return index_from_string(nb::cast<std::string>(obj), fn);
  if (std::string(Py_TYPE(o)->tp_name) == "torch.device") {
    const std::string type = nb::cast<std::string>(obj.attr("type"));
    if (type != "vdev") {
      rt::fail<std::invalid_argument>(fn, "expected a vdev device, got '",
                                      nb::cast<std::string>(nb::str(obj)), "'");
    }
    nb::object index = obj.attr("index");
    return index.is_none() ? -1 : nb::cast<int>(index);
  }
  throw nb::type_error((std::string("[") + fn +
                        "] expected an int, a 'vdev:N' string or a torch.device, got " +
                        Py_TYPE(o)->tp_name)
                           .c_str());
}

void set_device(nb::handle device) {
  const int index = index_from_py(device, "set_device");
  if (index == -1 && !PyLong_Check(device.ptr())) {
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
  m.def("_get_device", &rt::get_device, "The calling thread's current vdev device index.");
  m.def("_set_device", &set_device, nb::arg("device").none(),
        "Sets the calling thread's current vdev device (int, 'vdev:N' or torch.device).");
  m.def("_exchange_device", &rt::exchange_device, nb::arg("device"),
        "Sets the current device and returns the previous one.");
  m.def("_maybe_exchange_device", &rt::maybe_exchange_device, nb::arg("device"),
        "As _exchange_device, but -1 leaves the current device unchanged.");
  m.def("_device_index", &index_from_py, nb::arg("device").none(), nb::arg("fn"),
        "Index of an int / 'vdev:N' / torch.device spec (-1 when it has none).");
  m.def(
      "_get_device_properties",
      [](int index) {
        const rt::DeviceProperties& p = rt::device_properties(index);
        return std::make_tuple(p.name, p.total_memory, p.major, p.minor, p.multi_processor_count);
      },
      nb::arg("device"), "(name, total_memory, major, minor, multi_processor_count)");
  m.def("_synchronize", &rt::synchronize_device, nb::arg("device"),
        nb::call_guard<nb::gil_scoped_release>(),
        "Waits for all work queued on every stream of the device.");
  m.def(
      "_stream_priority",
      [](int device, std::int64_t id) { return rt::stream_from_id(device, id).priority(); },
      nb::arg("device"), nb::arg("stream_id"), "Priority of a vdev stream.");
  m.def("_event_elapsed_time", &backend::elapsed_time_by_ids, nb::arg("start_id"),
        nb::arg("end_id"), "Milliseconds between two recorded, completed, timing vdev events.");
  m.def("_set_memory_fraction", &backend::set_memory_fraction, nb::arg("fraction"),
        nb::arg("device"), "Limits what this process may reserve on the device (0..1).");
  m.def("_get_memory_fraction", &backend::memory_fraction, nb::arg("device"));
  m.def(
      "_empty_cache", [] { backend::device_allocator()->emptyCache({0, 0}); },
      nb::call_guard<nb::gil_scoped_release>(),
      "Returns unused cached device memory of every device (waits for queued work first).");
  m.def(
      "_host_memory_stats",
      [] {
        const at::HostStats s = backend::pinned_host_allocator()->get_stats();
        nb::dict d;
        const std::pair<const char*, const c10::CachingAllocator::Stat*> stats[] = {
            {"allocations", &s.allocations},
            {"allocated_bytes", &s.allocated_bytes},
            {"active_requests", &s.active_requests},
            {"active_bytes", &s.active_bytes}};
        for (const auto& [name, st] : stats) {
          const std::string n(name);
          d[(n + ".current").c_str()] = st->current;
          d[(n + ".peak").c_str()] = st->peak;
          d[(n + ".allocated").c_str()] = st->allocated;
          d[(n + ".freed").c_str()] = st->freed;
        }
        d["num_host_alloc"] = s.num_host_alloc;
        d["num_host_free"] = s.num_host_free;
        return d;
      },
      "Statistics of the pinned host allocator, keyed as torch.cuda.host_memory_stats.");
  m.def("_reset_peak_host_memory_stats",
        [] { backend::pinned_host_allocator()->reset_peak_stats(); });
  m.def("_reset_accumulated_host_memory_stats",
        [] { backend::pinned_host_allocator()->reset_accumulated_stats(); });
  m.def(
      "_stream_priority_range",
      [] { return std::make_tuple(rt::kLowestStreamPriority, rt::kHighestStreamPriority); },
      "(least, greatest) stream priority, as torch.cuda.Stream.priority_range().");
}

}  // namespace vdev::bindings
