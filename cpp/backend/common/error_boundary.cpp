#include "backend/common/error_boundary.h"

#include <c10/util/Exception.h>

#include <stdexcept>

#include "runtime/errors.h"

namespace vdev::backend {

void rethrow_as_torch_error() {
  try {
    throw;
  } catch (const c10::Error&) {
    throw;
  } catch (const vdev::rt::OutOfMemory& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, e.what());
  } catch (const vdev::rt::NotImplemented& e) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, e.what());
  } catch (const vdev::rt::TypeMismatch& e) {
    TORCH_CHECK_TYPE(false, e.what());
  } catch (const vdev::rt::CommFailure& e) {
    C10_THROW_ERROR(DistBackendError, e.what());
  } catch (const vdev::rt::DeviceAssertFailure& e) {
    throw c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                                vdev::rt::kDeviceAssertErrorCode, e.what());
  } catch (const std::out_of_range& e) {
    TORCH_CHECK_INDEX(false, e.what());
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  } catch (const std::exception& e) {
    TORCH_CHECK(false, e.what());
  }
  TORCH_CHECK(false, "vdev: unknown runtime error");
}

void rethrow_as_runtime_error() {
  try {
    throw;
  } catch (const c10::OutOfMemoryError& e) {
    throw vdev::rt::OutOfMemory(e.what_without_backtrace());
  } catch (const c10::IndexError& e) {
    throw std::out_of_range(e.what_without_backtrace());
  } catch (const c10::ValueError& e) {
    throw std::invalid_argument(e.what_without_backtrace());
  } catch (const c10::NotImplementedError& e) {
    throw vdev::rt::NotImplemented(e.what_without_backtrace());
  } catch (const c10::TypeError& e) {
    throw vdev::rt::TypeMismatch(e.what_without_backtrace());
  } catch (const c10::DistBackendError& e) {
    throw vdev::rt::CommFailure(e.what_without_backtrace());
  } catch (const c10::AcceleratorError& e) {
    throw vdev::rt::DeviceAssertFailure(e.what_without_backtrace());
  } catch (const c10::Error& e) {
    throw std::runtime_error(e.what_without_backtrace());
  }
}

}  // namespace vdev::backend
