#include "backend/common/vdev_device.h"

#include <c10/util/Exception.h>

namespace vdev::backend {

void check_vdev_device(c10::Device d, const char* fn) {
  TORCH_CHECK_VALUE(d.type() == kVdev, "[", fn, "] expected a vdev device, got ", d);
}

}  // namespace vdev::backend
