// Which failures of queued kernels are CUDA's device-side asserts: the classifier the runtime's
// sticky asserts ask (runtime/device_assert.h), installed once by init_backend.
//
// vdev's tasks run CPU's kernels; where a CUDA kernel checks a data-dependent condition with
// CUDA_KERNEL_ASSERT (an index out of range, a loss target out of bounds, a probability outside
// [0, 1]) CPU's kernel raises an exception for the same data. The table in device_asserts.cpp pairs
// each such operator (its task name, as queued) with the words of CPU's error for that condition,
// from the CUDA kernels' sources (file named per entry). A failure counts only when both match:
// another error of the same operator (a dtype CPU rejects that the check at the call missed) is
// not a device-side assert on CUDA either, and a false sticky error would break a working
// program, which is worse than a missed one. A compiled kernel's index check (Inductor's
// "index out of bounds:", python/torch_vdev/compile/index_checks.py) stands for Triton's
// device_assert, sticky on CUDA too.
//
// Not device-side asserts on CUDA, so not listed: checks CUDA makes on the host (bincount, histc,
// searchsorted's sorter, repeat_interleave without output_size, ctc_loss's lengths, bernoulli_
// with a float p, embedding_bag's offsets), out-of-memory errors, and every error raised at the
// call. Not listed although CUDA asserts: operators whose CPU kernel words the condition in no
// distinctive way (index_reduce, repeat_interleave with output_size, the compressed sparse
// invariants, fractional max pooling's backward, CPU does not check).
//
// Thread rules: stateless; the classifier runs on stream workers.
#pragma once

namespace vdev::backend {

// Installs the classifier (idempotent).
void install_device_assert_classifier();

}  // namespace vdev::backend
