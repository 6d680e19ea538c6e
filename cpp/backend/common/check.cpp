#include "backend/common/check.h"

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
  } catch (const std::out_of_range& e) {
    TORCH_CHECK_INDEX(false, e.what());
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  } catch (const std::exception& e) {
    TORCH_CHECK(false, e.what());
  }
  TORCH_CHECK(false, "vdev: unknown runtime error");
}

}  // namespace vdev::backend
