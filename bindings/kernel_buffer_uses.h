// A compiled kernel's buffers as the tensors its launch reads and writes
// (backend/common/launch.h), for the launch observers. Conversion only; kept apart from nanobind's
// headers (torch's Python headers pull in pybind11).
//
// Thread rules: with the GIL held. The uses point into the Python tensors of `args`, which must
// outlive them (the launch's call).
#pragma once

#include <Python.h>

#include <vector>

#include "backend/common/launch.h"
#include "backend/compile/launch_arguments.h"

namespace vdev::bindings {

// The vdev tensors among `args` (a tuple): 'p' arguments read, 'P' (out_ptr, in_out_ptr) written,
// by `signature`'s kinds.
std::vector<backend::TensorUse> kernel_buffer_uses(const backend::KernelSignature& signature,
                                                   PyObject* args);

}  // namespace vdev::bindings
