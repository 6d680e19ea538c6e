// torch_vdev._C._drain_autograd_device_threads: called at exit (python/torch_vdev/_registration.py)
// so that autograd's vdev device threads have finished with the last backward before Python
// finalizes.
//
// torch 2.13's `_engine_run_backward` stashes a Python object (a contextvars context) in the
// thread-local state every GraphTask copies. A device thread drops its reference to the GraphTask
// just after waking the thread that called backward; when that reference is the last, releasing
// the Python object needs the GIL, and a script that ends right after a backward races that
// release against interpreter finalization ("terminate called without an active exception",
// about 1 run in 4 of a five-line script). One more backward per device, made of C++ tensors (no
// Python object anywhere in its GraphTask) and run with the GIL released, is queued behind that
// release on the same device thread, so when it returns the release has happened. Its graph is a
// view of an empty tensor: no device memory, nothing queued on any stream (a stream's pending
// error stays for the exit report; a blocked stream cannot block the exit).
#include <ATen/ops/empty.h>
#include <nanobind/nanobind.h>
#include <torch/csrc/autograd/autograd.h>

#include "bindings/bindings.h"
#include "runtime/device.h"

namespace nb = nanobind;

namespace vdev::bindings {

void bind_autograd_exit(nb::module_& m) {
  m.def(
      "_drain_autograd_device_threads",
      [] {
        nb::gil_scoped_release no_gil;  // the device thread may need it for the earlier release
        for (int i = 0; i < rt::device_count(); ++i) {
          const auto options = at::TensorOptions().device(c10::DeviceType::PrivateUse1, i);
          const at::Tensor leaf = at::empty({0}, options).requires_grad_(true);
          torch::autograd::backward({leaf.view({0})}, {at::empty({0}, options)},
                                    /*retain_graph=*/false, /*create_graph=*/false, {leaf});
        }
      },
      "At exit: lets autograd's device threads finish with the last backward (see the source).");
}

}  // namespace vdev::bindings
