#include "backend/ops/aliased_call.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/SmallVector.h>

#include <cstring>
#include <optional>
#include <unordered_map>

#include "backend/common/stream_lookup.h"
#include "backend/common/sync_debug.h"
#include "backend/executor/launch_plan.h"
#include "backend/executor/tensor_args.h"
#include "backend/memory/storage_resize.h"
#include "runtime/memory.h"

namespace vdev::backend {
bool written_arguments_overlap(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  if (!op.schema().is_mutable()) return false;  // nothing written: the common case, no walk
  const auto& args = op.schema().arguments();
  const std::size_t first = stack.size() - args.size();
  struct Arg {
    at::Tensor t;
    bool written;
  };
  c10::SmallVector<Arg, 8> tensors;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const bool written = is_written(args[i]);
    for_each_tensor(stack[first + i], [&](const at::Tensor& t) {
      if (is_vdev_tensor(t) && t.numel() > 0) tensors.push_back({t, written});
    });
  }
  for (const Arg& w : tensors) {
    if (!w.written) continue;
    if (at::has_internal_overlap(w.t) == at::MemOverlap::Yes) return true;
    for (const Arg& other : tensors) {
      if (other.t.unsafeGetTensorImpl() == w.t.unsafeGetTensorImpl()) continue;
      if (!w.t.storage().is_alias_of(other.t.storage())) continue;
      if (at::get_overlap_status(w.t, other.t) != at::MemOverlapStatus::No) return true;
    }
  }
  return false;
}

void run_on_shared_aliases(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                           c10::Device device) {
  sync_current_stream(device);        // reported by its caller (fallback.cpp)
  const QuietSynchronizations quiet;  // its copies back are part of this one operation
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  const c10::FunctionSchema& schema = op.schema();
  const std::size_t nargs = schema.arguments().size();
  const std::size_t first = stack->size() - nargs;

  // One CPU Storage over each vdev Storage's bytes, shared by every alias of it, so CPU's overlap
  // checks see what overlaps. It is resizable when the device storage is: a kernel that grows an
  // out= argument (cat(..., out=x)) moves that storage to host memory (CPU's resize copies the
  // bytes), and it is copied back to the device afterwards, grown. CPU's kernel thus resizes, warns
  // and checks in its own order, as CUDA's does on the host.
  struct Shared {
    c10::Storage cpu;
    void* base;  // the kernel address it started at (null for a storage without bytes)
  };
  std::unordered_map<c10::StorageImpl*, Shared> shared;
  auto alias = [&](const at::Tensor& t) -> at::Tensor {
    if (!is_vdev_tensor(t)) return t;
    const c10::Storage& device_storage = t.storage();
    auto [it, inserted] = shared.try_emplace(device_storage.unsafeGetStorageImpl());
    if (inserted) {
      void* base = device_storage.data() == nullptr
                       ? nullptr
                       : vdev::rt::kernel_address(device_storage.data());
      it->second.base = base;
      it->second.cpu = c10::Storage(c10::Storage::use_byte_size_t(), device_storage.nbytes(),
                                    at::DataPtr(base, c10::Device(c10::kCPU)),
                                    c10::GetCPUAllocator(), device_storage.resizable());
    }
    at::Tensor a = at::empty({0}, t.options().device(c10::kCPU));
    a.set_(it->second.cpu, t.storage_offset(), t.sizes(), t.strides());
    if (t.is_conj()) a._set_conj(true);
    if (t.is_neg()) a._set_neg(true);
    return a;
  };
  // Written single tensors, to carry back what the kernel does to their metadata and storage.
  struct Written {
    at::Tensor device, cpu;
  };
  std::vector<Written> written;
  torch::jit::Stack cpu_stack;
  cpu_stack.reserve(nargs);
  for (std::size_t i = first; i < stack->size(); ++i) {
    const c10::IValue& v = (*stack)[i];
    if (is_written(schema.arguments()[i - first]) && v.isTensor() && is_vdev_tensor(v.toTensor())) {
      written.push_back({v.toTensor(), alias(v.toTensor())});
      cpu_stack.emplace_back(written.back().cpu);
      continue;
    }
    cpu_stack.push_back(map_tensors(v, alias));
  }
  // What the kernel did to the written arguments, carried to the device tensors (also when it then
  // failed: CPU's cat resizes its out= before its overlap check raises, and so does CUDA's).
  auto carry_back = [&] {
    for (Written& w : written) {
      c10::StorageImpl* device_storage = w.device.storage().unsafeGetStorageImpl();
      Shared& sh = shared.at(device_storage);
      if (sh.cpu.data() != sh.base) {  // grown into host memory: the device storage grows too
        resize_storage_bytes(device_storage, sh.cpu.nbytes());
        if (sh.cpu.nbytes() > 0) {
          std::memcpy(vdev::rt::kernel_address(device_storage->data()), sh.cpu.data(),
                      sh.cpu.nbytes());
        }
        sh.base = const_cast<void*>(sh.cpu.data());  // copied once, whichever view grew it
      }
      if (w.cpu.sizes() != w.device.sizes() || w.cpu.strides() != w.device.strides() ||
          w.cpu.storage_offset() != w.device.storage_offset()) {
        w.device.unsafeGetTensorImpl()->set_sizes_and_strides(w.cpu.sizes(), w.cpu.strides(),
                                                              w.cpu.storage_offset());
      }
    }
  };
  // CPU's kernel, with CPU's checks; below autocast (CPU autocast on the host must not recast).
  try {
    const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    op.callBoxed(&cpu_stack);
  } catch (...) {
    carry_back();
    throw;
  }
  carry_back();

  std::vector<c10::IValue> results;
  results.reserve(schema.returns().size());
  for (std::size_t r = 0; r < schema.returns().size(); ++r) {
    if (auto arg = written_argument(schema, schema.returns()[r])) {
      results.push_back((*stack)[first + *arg]);  // the written vdev argument itself
      continue;
    }
    results.push_back(map_tensors(cpu_stack[r], [&](const at::Tensor& t) {
      if (!t.defined()) return t;
      return at::empty_strided(t.sizes(), t.strides(), t.options().device(device)).copy_(t);
    }));
  }
  torch::jit::drop(*stack, nargs);
  for (auto& v : results) stack->push_back(std::move(v));
}

}  // namespace vdev::backend
