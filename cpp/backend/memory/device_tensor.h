// The one place where the memory of a new vdev tensor is made, for the factories
// (ops/factories.cpp: empty, empty_strided) and for operator outputs (executor/enqueue.cpp): the
// caching allocator's block on the current vdev device, wrapped as a strided tensor of `dtype`,
// and, as empty_cuda and empty_strided_cuda do, filled (NaN, or the largest integer) rather than
// left uninitialised when deterministic algorithms ask for it. Operator outputs are made here
// directly, not through the dispatcher's empty_strided, as CUDA's structured kernels make theirs
// (so the profiler counts an output's memory to its operator, not to an empty_strided child).
//
// The caller has checked the options (device, dtype against the capability profile, layout) and
// holds a DeviceGuard on the target device.
//
// Thread rules: any host thread (never a stream worker: device memory is freed on the host).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <optional>

namespace vdev::backend {

at::Tensor new_device_tensor(c10::IntArrayRef sizes, c10::IntArrayRef strides,
                             c10::ScalarType dtype);
// Contiguous in `memory_format` (default: row-major).
at::Tensor new_device_tensor(c10::IntArrayRef sizes, c10::ScalarType dtype,
                             std::optional<c10::MemoryFormat> memory_format);

}  // namespace vdev::backend
