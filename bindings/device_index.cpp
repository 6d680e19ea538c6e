#include "bindings/device_index.h"

#include <nanobind/stl/string.h>

#include <climits>
#include <cstring>
#include <string>

#include "runtime/errors.h"

namespace nb = nanobind;

namespace vdev::bindings {
namespace {

// The bindings' form of backend/common/vdev_device.h's check, for Python strings and devices.
[[noreturn]] void not_a_vdev_device(const char* fn, const std::string& got) {
  rt::fail<std::invalid_argument>(fn, "expected a vdev device, got '", got, "'");
}

// "vdev" -> -1, "vdev:N" -> N. Not c10's parser: it casts N to the 8-bit c10::DeviceIndex and
// checks the range only in debug builds, so "vdev:256" would silently mean vdev:0.
int index_from_string(const std::string& s, const char* fn) {
  const std::string prefix = "vdev";
  if (s.compare(0, prefix.size(), prefix) != 0 ||
      (s.size() > prefix.size() && s[prefix.size()] != ':')) {
    not_a_vdev_device(fn, s);
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

// numpy's integer scalars (numpy.int64, numpy.uint8, ...): integers through __index__. Other
// __index__ types (a one-element torch.Tensor) are not device indices, as in torch.cuda.
bool is_numpy_integer(PyObject* o) {
  return std::strncmp(Py_TYPE(o)->tp_name, "numpy.", 6) == 0 && PyIndex_Check(o);
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

int device_index_from_py(nb::handle obj, const char* fn, bool allow_none, bool* is_integer) {
  PyObject* o = obj.ptr();
  // Plain ints first: torch.vdev.set_device(i) is a hot path (benchmarks/bench_device.py).
  const bool integer = PyLong_Check(o) && !PyBool_Check(o);
  if (is_integer != nullptr) *is_integer = integer || is_numpy_integer(o);
  if (integer) return index_from_int(obj, o, fn);
  if (o == Py_None && allow_none) return -1;
  if (PyUnicode_Check(o)) return index_from_string(nb::cast<std::string>(obj), fn);
  if (std::strcmp(Py_TYPE(o)->tp_name, "torch.device") == 0) {
    const std::string type = nb::cast<std::string>(obj.attr("type"));
    if (type != "vdev") not_a_vdev_device(fn, nb::cast<std::string>(nb::str(obj)));
    nb::object index = obj.attr("index");
    return index.is_none() ? -1 : nb::cast<int>(index);
  }
  if (is_numpy_integer(o)) {
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
