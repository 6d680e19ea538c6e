#include "runtime/testing/gate.h"

#include <chrono>
#include <stdexcept>

#include "runtime/process.h"

namespace vdev::rt::testing {

void Gate::open() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
  }
  cv_.notify_all();
}

bool Gate::is_open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_;
}

int Gate::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_;
}

void Gate::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  ++waiting_;
  while (!open_ && !stopping()) cv_.wait_for(lock, std::chrono::milliseconds(50));
  --waiting_;
}

void Log::append(std::int64_t v) {
  std::lock_guard<std::mutex> lock(mu_);
  values_.push_back(v);
}

std::vector<std::int64_t> Log::values() const {
  std::lock_guard<std::mutex> lock(mu_);
  return values_;
}

void enqueue_gate(Stream& s, std::shared_ptr<Gate> gate) {
  s.enqueue("test_gate", [gate = std::move(gate)] { gate->wait(); });
}

void enqueue_log(Stream& s, std::shared_ptr<Log> log, std::int64_t value) {
  s.enqueue("test_log", [log = std::move(log), value] { log->append(value); });
}

void enqueue_failure(Stream& s, const std::string& message) {
  s.enqueue("test_failure", [message] { throw std::runtime_error(message); });
}

}  // namespace vdev::rt::testing
