#include "backend/memory/retained_memory.h"

#include "backend/common/vdev_device.h"
#include "backend/memory/host_allocator.h"

namespace vdev::backend {

std::shared_ptr<void> retain_memory(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage() || t.storage().data() == nullptr) return nullptr;
  // Device memory is stream-ordered by the caching allocator (backend/memory/device_cache.h):
  // nothing to hold.
  if (t.device().type() == kVdev) return nullptr;
  const c10::DataPtr& dp = t.storage().data_ptr();
  if (auto ref = retain_pinned_memory(dp)) return ref;
  TORCH_INTERNAL_ASSERT(false, "queued work may only use vdev or pinned memory; got memory on ",
                        t.device(), " that belongs to neither");
}

}  // namespace vdev::backend
