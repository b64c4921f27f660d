#pragma once
// VRAM_ASSERT(cond, what): a precondition (a `pre:` of a comment) or an invariant, checked where the check is
// cheap. Compiled in debug builds (VRAM_DEBUG_VALIDATE, CMakeLists.txt), where a failure throws
// invariant_error naming the file, the line, the condition and what it means; in release builds the
// condition is not evaluated and costs nothing. The expensive checks are the validate() functions.

#include "vram/core/error.hpp"

namespace vram::detail {
[[noreturn]] void assert_failed(const char* condition, const char* what, const char* file, int line);
}  // namespace vram::detail

#if defined(VRAM_DEBUG_VALIDATE) && VRAM_DEBUG_VALIDATE
#define VRAM_ASSERT(cond, what) \
  ((cond) ? static_cast<void>(0) : ::vram::detail::assert_failed(#cond, what, __FILE__, __LINE__))
#else
#define VRAM_ASSERT(cond, what) static_cast<void>(0)
#endif
