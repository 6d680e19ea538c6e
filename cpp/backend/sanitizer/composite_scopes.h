// The uninitialised-read tool's view of composite operators that read their own fresh memory
// before it is whole: a CompositeImplicitAutograd operator reaches vdev as the operators it is
// made of, and a few of them copy from their own output before every byte of it is written, then
// overwrite what they read. aten::_pad_circular (F.pad(mode="circular")) pads one dimension after
// the other: each step copies whole slices of the output, corners included, that a later step
// writes (ATen's PadNd.cpp, "Corners will be written more than once"). The result is right on
// every device; the intermediate copies read uninitialised bytes and throw them away.
//
// Inside such an operator (a RecordFunction callback, installed while the init tool is on),
// reads of memory allocated inside it are not checked; reads of its arguments (allocated before)
// still are, and every write is marked. docs/sanitizer.md lists these operators.
//
// Thread rules: watch_composites is called under the settings' mutex; the callback runs on any
// thread and keeps its state in thread-locals.
#pragma once

#include <cstdint>

namespace vdev::backend {

void watch_composites(bool on);

// The first allocation id whose reads are not checked on this thread (0: every read is checked).
std::uint64_t unchecked_allocations_from();

}  // namespace vdev::backend
