#include "backend/sanitizer/settings.h"

namespace vdev::backend {

namespace detail {
std::atomic<unsigned> g_sanitizer_flags{0};
}  // namespace detail

}  // namespace vdev::backend
