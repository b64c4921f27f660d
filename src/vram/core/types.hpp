#pragma once
// Words used across vram (the glossary):
//   device_ptr  an address in a device's virtual address space (0 is null); on the simulated device no host
//               memory stands behind it.
//   stream_id   a stream handle as an integer (CUstream on a real GPU); 0 is the default stream.
//   granule     the unit of physical memory of the virtual memory API (2 MiB on an H200).
//   reserved    bytes an allocator holds from the device; allocated: bytes of its live blocks after rounding;
//   requested   bytes the program asked for; live = requested bytes not yet freed.

#include <cstddef>
#include <cstdint>

namespace vram {

using device_ptr = std::uint64_t;
using stream_id = std::uint64_t;
using phys_handle = std::uint64_t;  // physical memory made by device::mem_create; 0 is none
using event_id = std::uint64_t;     // an event made by device::event_create; 0 is none

inline constexpr std::size_t KiB = std::size_t{1} << 10;
inline constexpr std::size_t MiB = std::size_t{1} << 20;
inline constexpr std::size_t GiB = std::size_t{1} << 30;

/// @brief Rounds @p n up to a multiple of @p align. pre: align > 0.
constexpr std::size_t round_up(std::size_t n, std::size_t align) noexcept {
  return (n + align - 1) / align * align;
}

}  // namespace vram
