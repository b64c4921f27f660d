#pragma once
// The pool's table of blocks it has handed out, readable without a lock: an open-addressing hash table
// from block address to {state, rounded size}. The address is 512-aligned, so its low bits carry the state
// in one atomic word and a state change is one compare-and-swap:
//   live   -- held by the program;
//   cached -- freed by the program, kept in a thread's cache for reuse;
//   gone   -- returned to the arena (a tombstone: a later block at the same address reuses the slot).
// Only the pool's lock holder inserts, marks blocks gone, or grows the table; any thread may move a block
// between live and cached. Growing marks every old slot `moved` before copying it, so a thread that loses
// the race retries on the new table; old tables are kept until the pool is destroyed (at most the size of
// the current one in all), so a thread still reading one never touches freed memory.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "vram/core/types.hpp"

namespace vram::detail {

enum class block_state : std::uint64_t { empty = 0, live = 1, cached = 2, gone = 3 };

class block_table {
 public:
  block_table();
  ~block_table();

  /// @brief Records a live block. pre: the caller holds the pool's lock; @p p is not live or cached.
  void insert_live(device_ptr p, std::size_t size);
  /// @brief Moves @p p from state @p from to state @p to. Returns its rounded size, or 0 when @p p is not in
  /// state @p from (then @p found holds the state it is in: empty when the table never held it).
  std::size_t transition(device_ptr p, block_state from, block_state to, block_state* found = nullptr);
  /// @brief The state and size of @p p without changing it.
  block_state lookup(device_ptr p, std::size_t* size = nullptr) const;
  /// @brief Calls @p fn(address, state, size) for every live or cached block. pre: the caller holds the pool's
  /// lock and no thread changes states meanwhile (for validate and snapshot).
  template <class F>
  void for_each(F&& fn) const {
    const table* t = tables_.back().get();
    for (std::size_t i = 0; i <= t->mask; ++i) {
      const std::uint64_t w = t->slots[i].word.load(std::memory_order_acquire);
      const auto st = static_cast<block_state>(w & state_mask);
      if (w == 0 || st == block_state::gone) continue;
      fn(static_cast<device_ptr>(w & ~(state_mask | moved_bit)), st, static_cast<std::size_t>(t->slots[i].size.load(std::memory_order_relaxed)));
    }
  }

 private:
  static constexpr std::uint64_t state_mask = 0x7, moved_bit = 0x8;
  struct slot {
    std::atomic<std::uint64_t> word{0};  // address | state, or 0
    std::atomic<std::uint64_t> size{0};
  };
  struct table {
    explicit table(std::size_t n) : mask(n - 1), slots(new slot[n]) {}
    std::size_t mask;
    std::unique_ptr<slot[]> slots;
  };
  static std::size_t hash(device_ptr p) noexcept { return static_cast<std::size_t>((p >> 9) * 0x9E3779B97F4A7C15ull >> 20); }
  void grow();

  std::atomic<table*> current_;
  std::vector<std::unique_ptr<table>> tables_;  // every table made; the last is current
  std::size_t used_ = 0;                        // slots ever filled in the current table (writer only)
  std::size_t live_ = 0;                        // live + cached entries (writer's view, for sizing)
};

}  // namespace vram::detail
