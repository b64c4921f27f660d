#pragma once
// What `vram bench` measures: an allocator under test, seen by each thread as a worker that allocates and
// frees one block of a given size, over and over. The measuring loop (measure.hpp) knows nothing of the
// allocator behind it; each kind of allocator (the host's malloc, a vram memory_resource, the device's legacy
// calls, CUDA's stream-ordered pool) is one target (host_targets.hpp, cuda_async_target.hpp).
//
// Decisions:
//  - A worker runs a whole batch of pairs per virtual call, so the loop's cost per pair is the allocator's
//    own, not a virtual call and a clock read.
//  - Workers are made on the thread that uses them (make_worker), so per-thread state (a CUDA stream, a
//    current context) is set up where it is used, and before the threads are released together.
//  - Each pair folds its pointer into the batch's return value and passes it through an empty asm statement
//    (keep), so no compiler can drop an allocation whose result is unused.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace vram::measure {

/// @brief One thread's handle on an allocator under test. Used by one thread only.
class bench_worker {
 public:
  virtual ~bench_worker() = default;
  /// @brief Allocates one block of @p bytes and frees it, @p n times. Returns the pointers folded together
  /// (xor), so that the work cannot be optimized away.
  /// @throws out_of_memory when an allocation fails; device_error when a driver call does.
  /// pre: bytes > 0.
  virtual std::uint64_t pairs(std::size_t bytes, std::uint64_t n) = 0;
};

/// @brief An allocator under test, shared by the threads of one measurement.
class bench_target {
 public:
  virtual ~bench_target() = default;
  /// @brief The allocator's name in tables and JSON: "vram", "glibc", "cudaMalloc", "cudaMallocAsync", ...
  virtual std::string_view name() const noexcept = 0;
  /// @brief A line for the reader about how it was measured (e.g. a lock added around it); empty for none.
  virtual std::string note() const { return {}; }
  /// @brief A worker for the calling thread. Thread-safe.
  virtual std::unique_ptr<bench_worker> make_worker() = 0;
};

namespace detail {

/// @brief Makes @p v observable to the compiler, so the computation of it cannot be removed.
inline void keep(std::uint64_t v) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  asm volatile("" : : "r"(v) : "memory");
#else
  static volatile std::uint64_t sink;
  sink = v;
#endif
}

}  // namespace detail

}  // namespace vram::measure
