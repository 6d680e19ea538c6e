// torch.ops.vdev._mark_overwritten(storage, message): makes every later access to the data of any
// tensor on `storage` raise `message`, as CUDA's torch._C._set_storage_data_ptr_access_error_msg
// does for the outputs of a CUDA graph that a later run has overwritten (torch.compile's
// reduce-overhead mode, cudagraph_trees.py). torch binds that function in CUDA builds only; the
// c10 method behind it is device-generic, so vdev exposes it as an operator (the dispatcher
// converts the Python storage, no libtorch_python header).
//
// The storage keeps its memory (it frees nothing): the storages vdev marks are non-owning views of
// a graph's memory, one per replay (python/torch_vdev/compile/graph_trees.py). Thread rules: the
// flags are plain members of the StorageImpl, so no other thread may be reading this storage's data
// pointer at the time (the caller marks storages of an earlier replay, on the thread that replays).
#include <c10/core/Storage.h>
#include <torch/library.h>

#include <string>
#include <utility>

namespace vdev::backend {
namespace {

void mark_overwritten(const c10::Storage& storage, std::string message) {
  storage.unsafeGetStorageImpl()->release_data_and_set_meta_custom_data_ptr_error_msg_(
      std::move(message));
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(vdev, m) {
  m.def("_mark_overwritten(Storage storage, str message) -> ()", &mark_overwritten);
}

}  // namespace vdev::backend
