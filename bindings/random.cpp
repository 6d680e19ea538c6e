#include <torch/csrc/Generator.h>

#include "backend/random/generator.h"
#include "bindings/bindings.h"

namespace nb = nanobind;

namespace vdev::bindings {

void bind_random(nb::module_& m) {
  m.def(
      "_default_generator",
      [](int device) {
        // A torch.Generator for ATen's default generator of the device (not a copy: seeding it
        // seeds what random operators on that device draw from).
        return nb::steal(THPGenerator_initDefaultGenerator(
            vdev::backend::default_generator(static_cast<c10::DeviceIndex>(device))));
      },
      nb::arg("device"), "The default generator of a vdev device, as a torch.Generator.");
}

}  // namespace vdev::bindings
