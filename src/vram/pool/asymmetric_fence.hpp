#pragma once
// Fences of unequal cost, for a protocol between a hot path that runs all the time and a rare path that
// needs the hot path to stand still (Dekker's: each side stores its flag, fences, then reads the other's).
// With the kernel's membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), light_fence() on the hot path is only a
// compiler barrier and heavy_fence() on the rare path makes the kernel run a full barrier on every thread of
// the process, which has the effect of each of them having fenced at that moment. Where membarrier is
// missing, asymmetric_fences() says so, and the two sides use sequentially consistent operations instead.

#include <atomic>

namespace vram::detail {

/// @brief Whether light_fence()/heavy_fence() can be used. Registers the process with the kernel the first
/// time; the answer never changes afterwards.
bool asymmetric_fences();

/// @brief The hot path's fence: orders the caller's earlier stores before its later loads, as seen by a
/// thread that calls heavy_fence(). pre: asymmetric_fences().
inline void light_fence() noexcept { std::atomic_signal_fence(std::memory_order_seq_cst); }

/// @brief The rare path's fence: after it, the stores every thread made before its last light_fence() are
/// visible to the caller. pre: asymmetric_fences().
void heavy_fence() noexcept;

}  // namespace vram::detail
