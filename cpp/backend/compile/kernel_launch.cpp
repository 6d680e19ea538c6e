#include "backend/compile/kernel_launch.h"

#include <utility>

#include "backend/common/stream_lookup.h"
#include "backend/common/task.h"

namespace vdev::backend {

const char* kernel_task_name(const std::string& name) { return intern_task_name(name); }

void launch_kernel(KernelEntry entry, const char* name, c10::DeviceIndex device, KernelArgs args,
                   HostScalars scalars, c10::ArrayRef<TensorUse> uses) {
  queue_launch({.stream = current_runtime_stream(device), .name = name, .uses = uses},
               [entry, args = std::move(args), scalars = std::move(scalars)] {
                 // The scalars' copies live in this task; the slots pointing at them are set in a
                 // copy of the arguments, so that the task itself is never written: a graph's
                 // replays share it and may run at the same time.
                 KernelArgs slots = args;
                 for (const HostScalar& s : scalars) {
                   slots[s.slot].pointer = const_cast<unsigned char*>(s.bytes);
                 }
                 entry(slots.data());
               });
}

}  // namespace vdev::backend
