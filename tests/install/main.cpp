// Uses the installed C++ library: vram's pool over a simulated device of 64 MiB. A 3 MiB block takes two
// granules of 2 MiB: 4 MiB reserved.
#include <cstdio>

#include "vram/device/sim_device.hpp"
#include "vram/pool/pool_resource.hpp"

int main() {
  vram::sim_device_options o;
  o.capacity = std::size_t{64} << 20;
  vram::sim_device gpu(o);
  vram::pool_resource pool(gpu);
  const vram::device_ptr p = pool.allocate(3 << 20, 0);
  const std::size_t reserved = pool.reserved_bytes();
  pool.deallocate(p, 3 << 20, 0);
  if (reserved != (std::size_t{4} << 20)) {
    std::fprintf(stderr, "consumer_cpp: %zu bytes reserved, not 4 MiB\n", reserved);
    return 1;
  }
  std::printf("consumer_cpp: a 3 MiB block through vram::vram, 4 MiB reserved\n");
  return 0;
}
