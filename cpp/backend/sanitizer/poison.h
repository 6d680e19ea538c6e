// VDEV_SANITIZER=poison: device blocks are filled with 0xFF bytes when the allocator hands them out
// and when they are freed, so that a read of memory no operation wrote, or of memory freed while
// another stream still used it, shows in the values: 0xFF bytes are NaN in every floating dtype
// (float16, bfloat16, float32, float64; the complex ones too), -1 in signed and the largest value
// in unsigned integer dtypes, True in bool.
//
// The fill is queued on the block's stream, so it runs after the work queued there before it (a
// free is stream-ordered: the block's last users on its stream still see their data) and before
// the block's next use. A block declared used by other streams (Tensor.record_stream) is not
// filled at its free (those streams may still read it). Nothing is filled while the stream
// captures a graph.
//
// Thread rules: called on the allocating or freeing thread.
#pragma once

#include <cstddef>

#include "runtime/stream.h"

namespace vdev::backend {

void poison_block(void* ptr, std::size_t bytes, vdev::rt::Stream& stream);

}  // namespace vdev::backend
