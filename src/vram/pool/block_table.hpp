#pragma once
// The pool's table of blocks it has handed out, readable without a lock: an open-addressing hash table
// from block address to {state, rounded size}. The address is 512-aligned, so its low bits carry the state
// in one atomic word:
//   live   -- held by the program;
//   cached -- freed by the program, kept in a thread's cache for reuse;
//   gone   -- returned to the arena (a tombstone: a later block at the same address reuses the slot).
// Who may write what, so that no change needs an atomic read-modify-write:
//   - only the pool's lock holder inserts blocks or marks them gone; it grows the table only while every
//     thread is stopped out of the hot path (pool_resource's stop protocol), so nobody reads a table that is
//     being replaced;
//   - a block's state moves between live and cached by the one thread that owns it at that moment: the
//     thread freeing it (live -> cached) or the thread taking it from its cache (cached -> live).
// Two threads freeing the same block at the same instant is a data race in the program; it is not detected
// (a double free by one thread, or by threads whose frees are ordered, is).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "vram/core/types.hpp"

namespace vram::detail {

enum class block_state : std::uint64_t { empty = 0, live = 1, cached = 2, gone = 3 };

class block_table {
  struct slot_rec;

 public:
  /// @brief Where a block's state lives; stays valid until the table grows.
  using slot = slot_rec;

  block_table();
  ~block_table();

  /// @brief Whether the next insert_live needs grow() first.
  bool full() const noexcept { return (used_ + 1) * 2 > current_.load(std::memory_order_relaxed)->mask + 1; }
  /// @brief Replaces the table by one at most a quarter full. pre: the pool's lock is held and every other
  /// thread is stopped out of the hot path.
  void grow();
  /// @brief Records a live block. pre: the pool's lock is held; !full(); @p p is not live or cached.
  void insert_live(device_ptr p, std::size_t size);
  /// @brief Frees @p p as the program asks: when it is live with rounded size @p size it becomes cached and
  /// the call returns true; otherwise nothing changes, and @p found and @p held say what the table holds.
  bool free_live(device_ptr p, std::size_t size, block_state& found, std::size_t& held) noexcept {
    slot* ignored = nullptr;
    return free_live(p, size, found, held, ignored);
  }
  /// @brief As above, and @p where is the block's slot (when it returns true), for mark_live.
  bool free_live(device_ptr p, std::size_t size, block_state& found, std::size_t& held, slot*& where) noexcept;
  /// @brief Moves the cached block @p p, whose slot is @p where, to live. pre: the caller owns the block and the
  /// table has not grown since @p where was had.
  static void mark_live(slot* where, device_ptr p) noexcept {
    where->word.store(p | static_cast<std::uint64_t>(block_state::live), std::memory_order_release);
  }
  /// @brief The slot of @p p, or null. pre: as transition.
  slot* find(device_ptr p) const noexcept {
    const table* t = current_.load(std::memory_order_acquire);
    for (std::size_t i = hash(p) & t->mask;; i = (i + 1) & t->mask) {
      slot& s = t->slots[i];
      const std::uint64_t w = s.word.load(std::memory_order_acquire);
      if (w == 0) return nullptr;
      if ((w & ~state_mask) == p) return &s;
    }
  }
  /// @brief Moves @p p from state @p from to state @p to. Returns its rounded size, or 0 when @p p is not in
  /// state @p from. pre: the caller owns the block (see above).
  std::size_t transition(device_ptr p, block_state from, block_state to) noexcept;
  /// @brief The state and size of @p p without changing it.
  block_state lookup(device_ptr p, std::size_t* size = nullptr) const noexcept;
  /// @brief Calls @p fn(address, state, size) for every live or cached block. pre: the caller holds the pool's
  /// lock and no thread changes states meanwhile (for validate and snapshot).
  template <class F>
  void for_each(F&& fn) const {
    const table* t = current_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i <= t->mask; ++i) {
      const std::uint64_t w = t->slots[i].word.load(std::memory_order_acquire);
      const auto st = static_cast<block_state>(w & state_mask);
      if (w == 0 || st == block_state::gone) continue;
      fn(static_cast<device_ptr>(w & ~state_mask), st, static_cast<std::size_t>(t->slots[i].size.load(std::memory_order_relaxed)));
    }
  }

 private:
  static constexpr std::uint64_t state_mask = 0x7;
  struct slot_rec {
    std::atomic<std::uint64_t> word{0};  // address | state, or 0
    std::atomic<std::uint64_t> size{0};
  };
  struct table {
    explicit table(std::size_t n) : mask(n - 1), slots(new slot[n]) {}
    std::size_t mask;
    std::unique_ptr<slot[]> slots;
  };
  static std::size_t hash(device_ptr p) noexcept { return static_cast<std::size_t>((p >> 9) * 0x9E3779B97F4A7C15ull >> 20); }
  std::unique_ptr<table> owned_;   // the current table
  std::atomic<table*> current_;    // owned_.get(), for readers outside the lock
  std::size_t used_ = 0;           // slots ever filled in the current table (writer only)
  std::size_t live_ = 0;           // live + cached entries (writer's view, for sizing)
};

}  // namespace vram::detail
