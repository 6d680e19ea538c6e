#include "backend/compile/kernel_launch.h"

#include <utility>

#include "backend/common/stream_lookup.h"
#include "backend/common/task.h"

namespace vdev::backend {

const char* kernel_task_name(const std::string& name) { return intern_task_name(name); }

void launch_kernel(KernelEntry entry, const char* name, c10::DeviceIndex device, KernelArgs args,
                   HostScalars scalars) {
  enqueue_task(current_runtime_stream(device), name,
               [entry, args = std::move(args), scalars = std::move(scalars)]() mutable {
                 // The copies live in this task (the runtime may have moved it since it was made).
                 for (HostScalar& s : scalars) args[s.slot].pointer = s.bytes;
                 entry(args.data());
               });
}

}  // namespace vdev::backend
