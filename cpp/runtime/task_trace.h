// Per-task records of what the streams ran: the one source of device timelines for observers (the
// profiler's device activities; the stream sanitizer and memory history are to read the same
// records).
//
// While an observer is installed, every task a stream queues carries its launch time, the host
// thread's current launch correlation (the profiler's id of the host call that queued it) and a
// tag from the layer that queued it (a kernel, a copy with its direction and bytes, a fill, a
// collective, an event record or wait, a graph replay); the worker stamps its start and end and
// hands the record to the observer. Without an observer a task pays one relaxed atomic load when
// it is queued and one when it runs.
//
// Clock: trace_clock_ns(), CLOCK_REALTIME in nanoseconds since the epoch (what torch's profiler
// and Kineto put on their timelines).
//
// Thread rules: set_task_observer may be called from any thread; the observer's on_task is called
// on stream workers, concurrently, and must not throw or block for long. A task queued while an
// observer is installed is reported to the observer installed when it ends (none: not reported).
// Ownership: the observer is the caller's and must outlive its installation (set_task_observer
// returns only once no worker can still be inside the previous observer's on_task).
#pragma once

#include <cstdint>

#include "runtime/export.h"

namespace vdev::rt {

enum class TaskKind : std::uint8_t {
  kOther = 0,   // runtime bookkeeping (IPC signals, test tasks)
  kKernel,      // an operator or compiled kernel
  kMemcpyHtoD,  // copies, by direction
  kMemcpyDtoH,
  kMemcpyDtoD,   // within one device
  kMemset,       // fills
  kCollective,   // a collective on a communication stream
  kGraphReplay,  // one replay of a captured graph
  kEventRecord,  // an event recorded on the stream
  kEventWait,    // the stream waits for an event of another stream
  kMemcpyPtoP,   // a copy of bytes from one device to another (appended: kinds keep their values)
};

// The host side of a copy between host and device: what CUPTI calls its memory kind, and what
// decides on CUDA whether a copy can run while the host goes on.
enum class HostMemory : std::uint8_t { kPageable = 0, kPinned };

// What the layer that queues a task says about it.
struct TaskTag {
  TaskKind kind = TaskKind::kKernel;
  std::uint64_t bytes = 0;  // copies, fills, collectives
  // Kernels: the most elements of any tensor they read or write, a hint of their size (the
  // backend's thread policy reads it, backend/common/task.h); 0: unknown.
  std::uint64_t elements = 0;
  HostMemory host = HostMemory::kPageable;  // copies between host and device: the host side
};

struct TaskRecord {
  const char* name;
  int device;
  std::int64_t stream;
  TaskTag tag;
  std::uint64_t correlation;  // the launching host call's correlation id (0: none)
  std::uint32_t launch_id;    // links its launch and its run; 0: no launch of its own (a graph's)
  std::int64_t launch_ns, launch_end_ns;  // the enqueue call on the host
  std::int64_t start_ns, end_ns;          // the run on the worker (start >= launch_ns)
  std::uint64_t host_thread;              // the thread that queued it (system thread id)
};

// A host call that waits for the device (stream, event or device synchronize).
struct HostCallRecord {
  const char* name;
  int device;
  std::int64_t stream;  // -1: every stream of the device
  std::uint64_t correlation;
  std::int64_t start_ns, end_ns;
  std::uint64_t host_thread;
};

class TaskObserver {
 public:
  virtual ~TaskObserver() = default;
  virtual void on_task(const TaskRecord& record) noexcept = 0;
  virtual void on_host_call(const HostCallRecord& record) noexcept = 0;
};

// Installs `observer` (nullptr: none). Returns once a worker can no longer be inside the previous
// observer's on_task.
VDEV_RT_API void set_task_observer(TaskObserver* observer);
// Whether an observer is installed (the hot path's one relaxed load).
VDEV_RT_API bool task_tracing() noexcept;
// The calling host thread's launch correlation: what tasks it queues are attributed to. The
// profiler sets it around each host operator (0: none).
VDEV_RT_API void set_launch_correlation(std::uint64_t id) noexcept;
VDEV_RT_API std::uint64_t launch_correlation() noexcept;
VDEV_RT_API std::int64_t trace_clock_ns() noexcept;
VDEV_RT_API std::uint64_t trace_thread_id() noexcept;

// A new launch id (never 0; wraps after 2^32 - 1 traced tasks).
std::uint32_t next_launch_id() noexcept;

// Reports a host call that waited for the device, from `start_ns` to now, when tracing.
VDEV_RT_API void report_host_call(const char* name, int device, std::int64_t stream,
                                  std::int64_t start_ns) noexcept;

// Reports work done in a stream's place, from `start_ns` to now, as a task of that stream, when
// tracing: a synchronous copy on the calling host thread (launched there), or a task a graph
// replay runs (`launched` false: the replay was its launch).
VDEV_RT_API void report_host_run(const char* name, int device, std::int64_t stream, TaskTag tag,
                                 std::int64_t start_ns, bool launched = true) noexcept;

namespace detail {
// For runtime/stream.cpp: hands a finished task's record to the installed observer, if any.
void report_task(const TaskRecord& record) noexcept;
}  // namespace detail

}  // namespace vdev::rt
