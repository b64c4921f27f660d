#include "vram/core/assert.hpp"

#include <fmt/format.h>

namespace vram::detail {

void assert_failed(const char* condition, const char* what, const char* file, int line) {
  throw invariant_error(fmt::format("{}:{}: {} does not hold: {}", file, line, condition, what));
}

}  // namespace vram::detail
