#include "runtime/errors.h"

namespace vdev::rt {
namespace {

// The length of the UTF-8 sequence at `s[i]`, or 0 if the bytes there are not one.
std::size_t utf8_sequence(const std::string& s, std::size_t i) noexcept {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b = byte(i);
  if (b < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the valid range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    n = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 3;
    if (b == 0xE0) lo = 0xA0;  // no overlong form
    if (b == 0xED) hi = 0x9F;  // no UTF-16 surrogate
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4;
    if (b == 0xF0) lo = 0x90;  // no overlong form
    if (b == 0xF4) hi = 0x8F;  // at most U+10FFFF
  } else {
    return 0;  // a continuation byte, C0/C1 (overlong) or F5..FF
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  return n;
}

}  // namespace

bool is_valid_utf8(const std::string& text, std::size_t* bad_at) noexcept {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence(text, i);
    if (n == 0) {
      if (bad_at != nullptr) *bad_at = i;
      return false;
    }
    i += n;
  }
  return true;
}

std::string printable_utf8(const std::string& text) {
  if (is_valid_utf8(text)) return text;
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence(text, i);
    if (n > 0) {
      out.append(text, i, n);
      i += n;
    } else {
      const auto b = static_cast<unsigned char>(text[i++]);
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 0xF];
    }
  }
  return out;
}

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
  } catch (const DeviceAssertFailure&) {
    return ErrorKind::kDeviceAssert;
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
    case ErrorKind::kDeviceAssert:
      throw DeviceAssertFailure(message);
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
