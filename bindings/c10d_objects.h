// The bridge to torch.distributed's Python objects, which are pybind11 objects of libtorch_python
// (torch._C._distributed_c10d): this is the one file that speaks pybind11, so that nanobind glue
// and pybind11 never share a translation unit.
//
// Thread rules: call with the GIL held. Ownership: returns a new reference.
#pragma once

#include <Python.h>

namespace vdev::bindings {

// A torch.distributed Backend object for a new vccl backend (backend/distributed/comm_backend.h)
// wrapping `gloo`, a torch.distributed.ProcessGroupGloo. Raises (C++ exceptions, mapped by the
// caller) if `gloo` is not a c10d Backend.
PyObject* new_comm_backend(PyObject* gloo, int rank, int size);

}  // namespace vdev::bindings
