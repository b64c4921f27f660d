// Ad-hoc: the pool alone, N threads allocating and freeing one block of SIZE, on DEVICE; prints pairs/s,
// CPU share and the pool's hot-path stops, to tell the pool's own stalls from other processes' work.
#include "vram/pool/pool_resource.hpp"
#include "vram/device/device_spec.hpp"
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>
#include <vector>
using namespace vram;
static double cpu_now() { timespec ts; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); return ts.tv_sec + ts.tv_nsec * 1e-9; }
int main(int argc, char** argv) {
  auto choice = open_device(parse_device_spec(argv[1]));
  std::printf("device: %s\n", choice.note.c_str());
  for (int a = 2; a + 1 < argc; a += 2) {
    std::size_t size = std::strtoull(argv[a], nullptr, 0);
    int threads = std::atoi(argv[a + 1]);
    pool_resource pool(*choice.dev);
    std::atomic<int> ready{0}; std::atomic<bool> go{false}, stop{false};
    std::vector<double> cpu(threads), pairs(threads);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i) { auto p = pool.allocate(size, 0); pool.deallocate(p, size, 0); }
      ready.fetch_add(1); while (!go.load()) {}
      double c0 = cpu_now(); long n = 0;
      while (!stop.load(std::memory_order_relaxed)) { for (int i = 0; i < 256; ++i) { auto p = pool.allocate(size, 0); pool.deallocate(p, size, 0); } n += 256; }
      cpu[t] = cpu_now() - c0; pairs[t] = n;
    });
    while (ready.load() < threads) {}
    auto s0 = pool.stats();
    auto t0 = std::chrono::steady_clock::now(); go = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(getenv("DIAG_MS") ? atoi(getenv("DIAG_MS")) : 300)); stop = true;
    for (auto& t : ts) t.join();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double c = 0, n = 0; for (int t = 0; t < threads; ++t) c += cpu[t], n += pairs[t];
    auto s1 = pool.stats();
    std::printf("size %9zu threads %2d: %8.1f M pairs/s, cpu share %.2f, hot_path_stops %lu, growths %lu, host_waits %lu\n",
                size, threads, n / wall / 1e6, c / (wall * threads), (unsigned long)(s1.hot_path_stops - s0.hot_path_stops),
                (unsigned long)(s1.arena.growths - s0.arena.growths), (unsigned long)(s1.host_waits - s0.host_waits)); std::printf("take_back_growths %lu reserved %zu\n", (unsigned long)s1.take_back_growths, pool.reserved_bytes());
  }
}
