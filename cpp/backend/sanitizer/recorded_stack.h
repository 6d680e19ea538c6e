// A Python stack the sanitizer keeps with an access or an allocation, for a report that may come
// much later. Gathering is cheap (torch::CapturedTraceback: code objects and instruction offsets),
// but holding code objects keeps alive what lives on them, such as the caches torch.compile
// (Dynamo) keeps on a function's code object: a compiled function and its graphs would outlive
// torch._dynamo.reset(). So stacks are turned into text in batches (torch's symbolizer, which
// reads each distinct frame once per batch) and their code objects released: when 256 are
// pending, at the first gather after a Python garbage collection started (torch.vdev.sanitizer's
// gc callback asks for it; the callback itself does nothing else, as a collection may start in
// the middle of an import), and before a report.
//
// Thread rules: safe from any thread; gathering and symbolizing take the GIL, so call them with
// no lock held that a thread holding the GIL may wait for.
#pragma once

#include <c10/core/Allocator.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/common/export.h"

namespace vdev::backend {

class RecordedStack {
 public:
  // The calling thread's Python stack; null when it runs no Python code.
  static std::shared_ptr<RecordedStack> gather();
  // "    File ..., line N, in name" lines, outermost call first (Python's traceback order).
  std::string text();

 private:
  friend void symbolize_pending_stacks();
  friend void symbolize_batch(const std::vector<std::shared_ptr<RecordedStack>>& live,
                              std::vector<std::shared_ptr<c10::GatheredContext>> frames);
  std::mutex mu_;
  std::shared_ptr<c10::GatheredContext> frames_;  // guarded by mu_; null once symbolized
  std::string text_;                              // guarded by mu_
};

// Frames of these files are left out of a stack's text while they are its outermost ones: a
// runner's own frames (python -m torch_vdev.sanitize and runpy's), so that stacks begin at the
// user's script. Replaces the set given before; thread-safe.
VDEV_BACKEND_API void hide_outer_frames(std::vector<std::string> filenames);

// Turns every pending stack into text, releasing its code objects.
VDEV_BACKEND_API void symbolize_pending_stacks();
// Turns `live` (with their frames, taken under their locks) into text.
void symbolize_batch(const std::vector<std::shared_ptr<RecordedStack>>& live,
                     std::vector<std::shared_ptr<c10::GatheredContext>> frames);
// Makes the next gather do it first (lock-free; for the gc callback).
VDEV_BACKEND_API void release_stacks_soon() noexcept;

}  // namespace vdev::backend
