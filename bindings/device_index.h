// The one parser of device arguments for torch.vdev: what torch.cuda accepts where it takes a
// device.
//
//   int, or a numpy integer                               -> that index (bool is rejected)
//   "vdev" / "vdev:N"                                     -> N, or -1 without an index
//   torch.device of type vdev                             -> its index, or -1 without one
//   None, where the caller allows it                      -> -1
//
// Errors name the caller and the value: ValueError for a device of another type or a malformed
// string, IndexError for an integer that does not fit, TypeError for anything else. The range of
// a valid index is checked by the runtime, not here.
//
// Thread rules: needs the GIL.
#pragma once

#include <nanobind/nanobind.h>

namespace vdev::bindings {

// `is_integer`, if given, is set to whether `obj` is an integer (so -1 is an index, not "none").
int device_index_from_py(nanobind::handle obj, const char* fn, bool allow_none,
                         bool* is_integer = nullptr);

}  // namespace vdev::bindings
