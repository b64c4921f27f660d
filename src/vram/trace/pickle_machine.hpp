#pragma once
// The pickle stack machine behind read_pickle (pickle.hpp), private to the trace readers: its state, and its
// work in three files. pickle.cpp reads one opcode at a time from a buffer refilled as bytes arrive (a length
// an opcode claims costs only the bytes that really arrive); containers and strings go to the tree's flat
// arrays, and the stack, the marks and the memo hold references into them. pickle_records.cpp compacts trace
// entries into records as they are read and drops their frames. pickle_entries.cpp reads a whole entry at
// once, where it can, for the same result at half the cost.

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vram/core/chunked_vector.hpp"
#include "vram/core/error.hpp"
#include "vram/trace/pickle.hpp"

namespace vram::detail {

class pickle_machine {
 public:
  pickle_machine(pickle_tree& tree, std::string start, const pickle_read& read, const std::string& path,
                 const pickle_limits& limits, const pickle_records* records)
      : tree_(tree), buf_(std::move(start)), read_(read), path_(path), limits_(limits), records_(records) {}

  void run();

 private:
  using ref = pickle_tree::ref;
  using kind = pickle_tree::kind;

  [[noreturn]] void fail(std::string_view problem) const {
    throw input_error(fmt::format("{}: byte {}: {}", path_, op_offset_, problem));
  }

  std::uint64_t offset() const noexcept { return base_ + pos_; }

  // Makes @p need bytes available from pos_, reading as they arrive; false when the input ends first.
  [[gnu::always_inline]] bool fill(std::size_t need) { return buf_.size() - pos_ >= need || refill(need); }

  [[gnu::noinline]] bool refill(std::size_t need);

  [[gnu::always_inline]] std::string_view take(std::size_t n) {
    if (!fill(n))
      fail(fmt::format("the input ends inside the opcode (it needs {} more byte{}, {} left)", n, n == 1 ? "" : "s",
                       buf_.size() - pos_));
    const std::string_view s(buf_.data() + pos_, n);
    pos_ += n;
    return s;
  }

  [[gnu::always_inline]] unsigned char u8() {
    if (!fill(1)) {
      op_offset_ = offset();
      fail("the input ends before the pickle's STOP opcode (truncated)");
    }
    return static_cast<unsigned char>(buf_[pos_++]);
  }

  std::uint64_t le(std::size_t n) {
    const std::string_view s = take(n);
    std::uint64_t v = 0;
    for (std::size_t i = n; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(s[i]);
    return v;
  }

  // An unsigned little-endian argument of N bytes (1, 2, 4 or 8), read in one load.
  template <std::size_t N>
  std::uint64_t le() {
    static_assert(N == 1 || N == 2 || N == 4 || N == 8);
    if constexpr (std::endian::native != std::endian::little) return le(N);
    using word = std::conditional_t<N == 1, std::uint8_t,
                                    std::conditional_t<N == 2, std::uint16_t,
                                                       std::conditional_t<N == 4, std::uint32_t, std::uint64_t>>>;
    word w;
    std::memcpy(&w, take(N).data(), N);
    return w;
  }

  static ref make(kind k, std::uint64_t payload = 0) {
    return (static_cast<std::uint64_t>(k) << pickle_tree::tag_shift) | payload;
  }

  [[gnu::always_inline]] ref make_integer(std::int64_t v) {
    constexpr std::int64_t limit = std::int64_t{1} << (pickle_tree::tag_shift - 1);
    if (v >= -limit && v < limit) return make(kind::integer, static_cast<std::uint64_t>(v) & pickle_tree::payload_mask);
    tree_.wide_.push_back(v);
    return (std::uint64_t{pickle_tree::boxed_integer_tag} << pickle_tree::tag_shift) | (tree_.wide_.size() - 1);
  }

  ref make_container(kind k);

  // Appends [first, last) to container @p r: in place while it has room or ends the shared array, else
  // moved to the array's end with twice the room (a container filled in one batch gets exactly its size).
  void append(ref r, const ref* first, const ref* last);

  ref make_text(kind k, std::size_t n);

  // The index of @p s among the tree's strings, added if new. Short strings that a pickle repeats without
  // the memo (PyTorch writes each entry's 'N/A' anew) are found first in a small cache, without hashing.
  std::uint64_t intern(std::string_view s);

  [[gnu::always_inline]] void push(ref r) {
    if (stack_.size() == stack_.capacity()) [[unlikely]]
      stack_.reserve(std::max<std::size_t>(64, stack_.capacity() * 2));
    stack_.push_back(r);
  }

  [[gnu::always_inline]] ref pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("the opcode needs a value and the stack has none");
    const ref r = stack_.back();
    stack_.pop_back();
    return r;
  }

  [[gnu::always_inline]] ref top() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("the opcode needs a value and the stack has none");
    return stack_.back();
  }

  // Removes the last MARK; the values above it are stack_[its position, end).
  std::size_t pop_mark();

  // Moves the values above the last MARK into a new container of kind @p k, or onto the container under
  // the MARK (APPENDS, SETITEMS) when @p onto_below.
  void collect(kind k, bool onto_below, std::string_view op);

  // The dict under stack_[m - 1], whose items are stack_[m, end), as a record (pickle_records): false, and
  // nothing changed, when it is not one.
  bool compact(ref dict, std::size_t m);

  // A trace entry read in one go, at EMPTY_DICT (already read) with records to compact: a dict memoized at
  // once (or not), filled by one SETITEMS of string keys and values that are ints, strings, None, booleans
  // or memo fetches, and, under the dropped key, an empty list or one of memo fetches (frames PyTorch
  // pickled before). It is what a snapshot holds a million times; read here opcode after opcode, with no
  // stack, no dispatch through step() and no container, it costs half. Anything else (a new frame dict
  // inside, an opcode not listed, a FRAME between two opcodes, a memo index out of order, the end of the
  // buffered bytes, a dict that is no record) returns false with pos_ and the memo as they were, and the
  // machine reads the dict one opcode at a time. Either way the tree, the memo and the stack end the same
  // (the fuzz target pickle_paths compares the two); the only other trace is strings interned and wide
  // integers kept, which the slow path makes again the same way.
  bool try_entry();

  // try_entry's place in the buffer, and what it must undo.
  struct entry_scan {
    static constexpr std::uint64_t npos = ~std::uint64_t{0};
    const unsigned char* p;
    const unsigned char* end;
    std::size_t memo_start;  // the memo's size when the scan began
    std::uint64_t dict_memo;  // the dict's memo index, or npos
  };

  // Steps over the opcode @p op if it is the next byte; false (and nothing read) if it is not, or at the end.
  [[gnu::always_inline]] static bool skip(entry_scan& c, unsigned char op) {
    if (c.p >= c.end || *c.p != op) return false;
    ++c.p;
    return true;
  }

  // An unsigned little-endian argument of N bytes at c.p, read in one load; false past the buffer's end.
  template <std::size_t N>
  [[gnu::always_inline]] static bool scan_le(entry_scan& c, std::uint64_t& out) {
    using word = std::conditional_t<N == 1, std::uint8_t,
                                    std::conditional_t<N == 2, std::uint16_t,
                                                       std::conditional_t<N == 4, std::uint32_t, std::uint64_t>>>;
    if (static_cast<std::size_t>(c.end - c.p) < N) return false;
    word w;
    std::memcpy(&w, c.p, N);
    c.p += N;
    out = w;
    return true;
  }

  // A memo opcode after a value, if one follows, storing @p r; false to give up.
  [[gnu::always_inline]] bool scan_memo(entry_scan& c, ref r, std::uint64_t* index_out = nullptr);

  // A memo fetch's value (its argument of N bytes); false for an index not stored, or the dict's own.
  template <std::size_t N>
  [[gnu::always_inline]] bool scan_fetch(entry_scan& c, ref& r);

  // A string of the length in the N bytes at c.p, interned, and its memo opcode if one follows.
  template <std::size_t N>
  [[gnu::always_inline]] bool scan_text(entry_scan& c, ref& r);

  // The opcodes of one entry from just after its EMPTY_DICT to its SETITEMS: keys and values into
  // entry_kv_, memo entries stored as they come; false at anything try_entry does not take.
  bool scan_entry(entry_scan& c);

  // One value that is no container: an int, None, a boolean, a string (and its memo opcode) or a memo fetch.
  [[gnu::always_inline]] bool scan_value(entry_scan& c, ref& r);

  // What fills a dropped list made empty just before: nothing, one item and APPEND, or a MARK, items and
  // APPENDS; an item is a memo fetch (a frame PyTorch pickled before) or a new flat dict (a new frame). The
  // items are not kept, and a new frame is None in the memo, as drop_frames() leaves it. (After the empty
  // list, a fetch not followed by APPEND is the entry's next key; a MARK can only open the list's items.)
  bool scan_dropped_items(entry_scan& c);

  // One item of a dropped list: a memo fetch, or a new dict, empty or filled by one SETITEMS of values that
  // are no containers, none under the tag's key. @p marks_open: the MARKs the scan holds open around it (the
  // entry's, and the list's when its items follow one), which count against the depth limit with the dict's.
  bool scan_dropped_item(entry_scan& c, std::size_t marks_open);

  // A container given back leaves the memo: the entry at @p index that still holds @p r reads None from now
  // on, so that a later fetch cannot reach the container that takes its slot.
  void forget(std::uint64_t index, ref r);

  // The dict of the @p n keys and values (alternating) at @p kv as a record (pickle_records), and its dropped
  // list if it has one: false when it is not a record.
  bool as_record(const ref* kv, std::size_t n, pickle_tree::record& rec, std::optional<ref>& dropped);

  // The dropped list of a compacted dict (PyTorch's frames: a list of flat dicts), when it was made after the
  // dict (an older one, fetched from the memo, stays as it is): its slot and those of the containers made
  // inside it are reused, and their items go where they end the shared array. Each container's items are
  // its own, so cutting them touches no other container. A freed one leaves the memo (forget): a later
  // fetch of it, as PyTorch makes of a frame it pickled before, reads None, and no container that took its
  // slot can be reached, or given back, through it.
  void drop_frames(ref list, std::uint64_t dict_born);

  // What the interned string @p id is as a key of a record (pickle_records): a field's index, role_tag,
  // role_dropped or role_other; worked out once a string.
  static constexpr int role_tag = 4, role_dropped = 5, role_other = 6;
  int role_of(std::uint64_t id) {
    if (id < roles_.size() && roles_[id] >= 0) return roles_[id];
    return work_out_role(id);
  }
  int work_out_role(std::uint64_t id);

  void expect_kind(ref r, kind want, std::string_view op);

  // Picklers number the memo 0, 1, 2, ...: those indexes go to a vector; any other (a hand-made pickle's
  // BINPUT 2^28) to a map, so that one opcode cannot make the memo large.
  void memo_put(std::uint64_t index);

  [[gnu::always_inline]] void memo_get(std::uint64_t index) {
    if (index < memo_.size()) {
      push(memo_[index]);
      return;
    }
    const auto it = sparse_memo_.find(index);
    if (it == sparse_memo_.end()) fail(fmt::format("memo index {} was never stored", index));
    push(it->second);
  }

  void integer_bytes(std::size_t n);

  void stop();

  [[gnu::always_inline]] void step(unsigned char op);

  pickle_tree& tree_;
  std::string buf_;
  std::size_t pos_ = 0;
  std::uint64_t base_ = 0;  // the input offset of buf_[0]
  bool eof_ = false;
  std::size_t read_size_ = 4096;
  const pickle_read& read_;
  const std::string& path_;
  const pickle_limits& limits_;
  const pickle_records* records_;
  std::uint64_t op_offset_ = 0;
  std::vector<ref> stack_;
  std::vector<std::size_t> marks_;
  chunked_vector<ref> memo_;  // chunks: a memo of millions never doubles in place
  std::unordered_map<std::uint64_t, ref> sparse_memo_;
  std::vector<std::uint64_t> free_containers_;
  std::vector<std::pair<std::uint64_t, std::uint32_t>> regions_;  // drop_frames' scratch: (offset, capacity)
  std::vector<std::int8_t> roles_;  // by string id; -1: not worked out yet
  static constexpr std::uint64_t none_interned = ~std::uint64_t{0};
  struct recent_string {
    std::uint64_t id = none_interned;
  };
  std::array<recent_string, 16> recent_{};  // intern's cache
  // try_entry's: memo entries it replaced (index, old value), the keys and values it read.
  std::vector<std::pair<std::uint64_t, ref>> overwritten_;
  std::vector<ref> entry_kv_;
};

}  // namespace vram::detail
