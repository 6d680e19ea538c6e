#include "backend/layouts/queued_products.h"

namespace vdev::backend {

bool try_queue_layout_product(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                              c10::Device device) {
  return false;
}

}  // namespace vdev::backend
