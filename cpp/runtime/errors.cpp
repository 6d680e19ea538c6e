#include "runtime/errors.h"

namespace vdev::rt {

ErrorKind current_error_kind() noexcept {
  try {
    throw;
  } catch (const OutOfMemory&) {
    return ErrorKind::kOutOfMemory;
  } catch (const NotImplemented&) {
    return ErrorKind::kNotImplemented;
  } catch (const TypeMismatch&) {
    return ErrorKind::kType;
  } catch (const CommFailure&) {
    return ErrorKind::kComm;
  } catch (const std::out_of_range&) {
    return ErrorKind::kIndex;
  } catch (const std::invalid_argument&) {
    return ErrorKind::kValue;
  } catch (...) {
    return ErrorKind::kRuntime;
  }
}

void throw_error(ErrorKind kind, const std::string& message) {
  switch (kind) {
    case ErrorKind::kOutOfMemory:
      throw OutOfMemory(message);
    case ErrorKind::kNotImplemented:
      throw NotImplemented(message);
    case ErrorKind::kType:
      throw TypeMismatch(message);
    case ErrorKind::kComm:
      throw CommFailure(message);
    case ErrorKind::kIndex:
      throw std::out_of_range(message);
    case ErrorKind::kValue:
      throw std::invalid_argument(message);
    case ErrorKind::kRuntime:
      break;
  }
  throw std::runtime_error(message);
}

}  // namespace vdev::rt
