// Events of the simulated driver: points on stream timelines.
//
// Each record() creates a new mark, queued on the stream; the mark completes when the stream's
// worker reaches it (every task queued before it has finished) and takes the completion time then.
// The event refers to its latest mark (re-recording moves it, CUDA's semantics): query() and
// synchronize() look at the latest mark; block(stream) makes `stream` wait for the mark that is
// latest at the time of the call, even if the event is re-recorded afterwards. An event that was
// never recorded is complete, and block() on it does nothing.
//
// Errors carry forward: a mark completed on a stream with a pending error holds that error;
// synchronize() throws it, and a stream waiting on the mark fails its wait task with it (so the
// waiting stream reports it at its next synchronize or enqueue).
//
// An event belongs to the device of the first stream it is recorded on; recording it on another
// device's stream is an error. elapsed_ms needs two completed, timing-enabled events of one device.
//
// Ownership: the creator owns the Event (c10 holds it as void* and deletes it in destroyEvent).
// Queued tasks hold the marks, not the event, so an event may be destroyed with records pending.
//
// Thread rules: every member is safe from any thread.
#pragma once

#include <memory>
#include <mutex>

#include "runtime/export.h"
#include "runtime/stream.h"

namespace vdev::rt {

struct Mark;

class VDEV_RT_API Event {
 public:
  explicit Event(bool timing);
  int device() const;  // -1 until first recorded

  void record(Stream& stream);
  bool query() const;
  void synchronize() const;
  void block(Stream& stream) const;
  // Milliseconds from this event's latest mark to `end`'s latest mark.
  double elapsed_ms(const Event& end) const;

 private:
  std::shared_ptr<Mark> latest() const;

  const bool timing_;
  mutable std::mutex mu_;
  std::shared_ptr<Mark> latest_;  // guarded by mu_; null until recorded
  int device_ = -1;               // guarded by mu_
};

}  // namespace vdev::rt
