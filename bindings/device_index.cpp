#include "bindings/device_index.h"

#include <c10/core/Device.h>
#include <c10/util/Exception.h>
#include <nanobind/stl/string.h>

#include <climits>
#include <cstring>
#include <optional>
#include <string>

#include "runtime/errors.h"

namespace nb = nanobind;

namespace vdev::bindings {
namespace {

int index_from_string(const std::string& s, const char* fn) {
  std::optional<c10::Device> device;
  try {
    device.emplace(s);  // c10's parser: knows "vdev" once PrivateUse1 is renamed
  } catch (const c10::Error&) {
  }
  if (!device) {
    if (s.rfind("vdev", 0) == 0) {
      rt::fail<std::invalid_argument>(fn, "invalid vdev device string '", s,
                                      "': expected 'vdev' or 'vdev:N'");
    }
    rt::fail<std::invalid_argument>(fn, "expected a vdev device, got '", s, "'");
  }
  if (device->type() != c10::DeviceType::PrivateUse1) {
    rt::fail<std::invalid_argument>(fn, "expected a vdev device, got '", s, "'");
  }
  return device->has_index() ? device->index() : -1;
}

// `value` is a Python int; `obj` is what the caller passed (for the message).
int index_from_int(nb::handle obj, PyObject* value, const char* fn) {
  const long v = PyLong_AsLong(value);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    rt::fail<std::out_of_range>(fn, "device index ", nb::str(obj).c_str(), " out of range");
  }
  if (v < INT_MIN || v > INT_MAX) {
    rt::fail<std::out_of_range>(fn, "device index ", v, " out of range");
  }
  return static_cast<int>(v);
}

}  // namespace

int device_index_from_py(nb::handle obj, const char* fn, bool allow_none) {
  PyObject* o = obj.ptr();
  // Plain ints first: torch.vdev.set_device(i) is a hot path (benchmarks/bench_device.py).
  if (PyLong_CheckExact(o)) return index_from_int(obj, o, fn);
  if (o == Py_None && allow_none) return -1;
  if (PyUnicode_Check(o)) return index_from_string(nb::cast<std::string>(obj), fn);
  if (std::strcmp(Py_TYPE(o)->tp_name, "torch.device") == 0) {
    const std::string type = nb::cast<std::string>(obj.attr("type"));
    if (type != "vdev") {
      rt::fail<std::invalid_argument>(fn, "expected a vdev device, got '",
                                      nb::cast<std::string>(nb::str(obj)), "'");
    }
    nb::object index = obj.attr("index");
    return index.is_none() ? -1 : nb::cast<int>(index);
  }
  // Other integers: int subclasses and anything with __index__ (numpy integers), but not bool,
  // which torch.device(True) rejects too.
  if (!PyBool_Check(o) && (PyLong_Check(o) || PyIndex_Check(o))) {
    nb::object as_int = nb::steal(PyNumber_Index(o));
    if (!as_int.is_valid()) throw nb::python_error();
    return index_from_int(obj, as_int.ptr(), fn);
  }
  throw nb::type_error((std::string("[") + fn +
                        "] expected an int, a 'vdev:N' string or a torch.device, got " +
                        Py_TYPE(o)->tp_name)
                           .c_str());
}

}  // namespace vdev::bindings
