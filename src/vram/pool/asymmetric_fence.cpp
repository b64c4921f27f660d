// membarrier-backed fences (asymmetric_fence.hpp).
#include "vram/pool/asymmetric_fence.hpp"

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace vram::detail {

namespace {

#if defined(__linux__) && defined(SYS_membarrier)
long membarrier(int cmd) { return syscall(SYS_membarrier, cmd, 0u, 0); }
#endif

bool register_with_kernel() {
#if defined(__linux__) && defined(SYS_membarrier)
  const long supported = membarrier(MEMBARRIER_CMD_QUERY);
  if (supported < 0 || (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
  return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
#else
  return false;
#endif
}

}  // namespace

bool asymmetric_fences() {
  static const bool available = register_with_kernel();
  return available;
}

void heavy_fence() noexcept {
#if defined(__linux__) && defined(SYS_membarrier)
  membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);  // cannot fail once registered (asymmetric_fences())
#endif
}

}  // namespace vram::detail
