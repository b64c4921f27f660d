#pragma once
// A strict reader of Python pickles that hold plain data (protocols 2 to 5): None, booleans, integers,
// floats, strings, bytes, lists, tuples and dicts, with the memo that shares them. It is a stack machine
// over the opcodes alone and never looks a name up: an opcode that would name a class or call something
// (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, NEWOBJ, INST, OBJ, PERSID, EXT*), or that no protocol-2+ pickler
// of plain data writes, is refused with its name and byte offset. PyTorch's memory snapshots
// (torch.cuda.memory._dump_snapshot) are such pickles; torch_snapshot.hpp reads their meaning.
//
// The input is read in pieces through a callback, so a large pickle is held once, as the tree: values live
// in flat arrays addressed by 32-bit references (no recursion anywhere, so nesting costs no stack), and
// strings are interned, so the keys repeated in every dict cost one copy.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "vram/core/chunked_vector.hpp"

namespace vram::detail {

/// @brief The tree a pickle holds. A value is a 64-bit reference: its kind in the top 4 bits, and below
/// them an integer of up to 60 bits itself, or the index of a string, a container, a float or a wider int.
/// Containers keep their items in one shared array, so that a million small dicts cost no million
/// allocations.
class pickle_tree {
 public:
  using ref = std::uint64_t;
  enum class kind : std::uint8_t { none, boolean, integer, big_integer, floating, string, bytes, list, tuple, dict, record };

  /// @brief A dict compacted as it was read (see pickle_records): its tag's text and its fields.
  struct record {
    std::int64_t fields[4] = {};   // in pickle_records::fields' order
    std::uint32_t tag = 0;         // the string index of the tag's value (record_tag); a dict whose tag's
                                   // index does not fit stays a dict
    std::uint8_t present = 0;      // bit i: field i is in the dict (and an int: otherwise it is not a record)
  };
  static_assert(sizeof(record) == 40, "a record per trace entry: keep it small");

  ref root() const noexcept { return root_; }
  kind kind_of(ref r) const noexcept {
    const auto tag = static_cast<std::uint8_t>(r >> tag_shift);
    return tag == boxed_integer_tag ? kind::integer : static_cast<kind>(tag);
  }
  /// @brief The value of an integer (or boolean) node. pre: kind_of(r) is integer or boolean.
  std::int64_t integer(ref r) const noexcept {
    if ((r >> tag_shift) == boxed_integer_tag) return wide_[payload(r)];
    return static_cast<std::int64_t>(r << 4) >> 4;  // the low 60 bits, sign-extended
  }
  double floating(ref r) const noexcept;
  /// @brief The text of a string or bytes node.
  std::string_view text(ref r) const noexcept { return strings_[payload(r)]; }
  /// @brief A list's or tuple's items; a dict's keys and values, alternating.
  std::span<const ref> items(ref r) const noexcept {
    const container& c = containers_[payload(r)];
    return {items_.data() + c.offset, c.size};
  }
  /// @brief The value under string key @p key in dict @p d, if any. pre: kind_of(d) == kind::dict.
  std::optional<ref> find(ref d, std::string_view key) const noexcept;
  /// @brief A compacted dict. pre: kind_of(r) == kind::record.
  const record& record_of(ref r) const noexcept { return records_[payload(r)]; }
  std::string_view record_tag(ref r) const noexcept { return strings_[records_[payload(r)].tag]; }

  /// @brief The name of a kind with its article ("a dict", "an int", "None"), for errors.
  static std::string_view name(kind k) noexcept;

 private:
  friend class pickle_machine;
  static constexpr int tag_shift = 60;
  static constexpr std::uint8_t boxed_integer_tag = 15;
  static constexpr std::uint64_t payload_mask = (std::uint64_t{1} << tag_shift) - 1;
  static std::uint64_t payload(ref r) noexcept { return r & payload_mask; }

  struct container {
    std::uint64_t offset = 0;  // into items_
    std::uint32_t size = 0, capacity = 0;
    std::uint64_t memo = ~std::uint64_t{0};  // the memo index it was stored at, if any
    std::uint64_t born = 0;  // items_.size() when it was made: what its subtree appended lies beyond
  };
  std::vector<container> containers_;
  chunked_vector<record> records_;
  std::vector<ref> items_;
  std::vector<std::int64_t> wide_;   // integers beyond 60 bits, and floats' bits
  std::deque<std::string> strings_;  // a deque: interned views stay valid as it grows
  std::unordered_map<std::string_view, std::uint64_t> interned_;
  ref root_ = 0;
};

/// @brief Reads up to len bytes into out; returns how many (0 at the end). May throw input_error.
using pickle_read = std::function<std::size_t(char* out, std::size_t len)>;

/// @brief Dicts to compact as they are read, so that a million of them cost a record each, not a tree: a
/// dict whose first batch of items holds @p tag_key with a string value, and each of @p fields that it
/// holds as an int (absent fields are allowed; a field of another kind leaves the dict a dict). The list
/// under @p dropped_key, when its items are the last read before the dict's, is dropped with it (it holds
/// nothing the reader wants: PyTorch's stack frames).
struct pickle_records {
  std::string_view tag_key;
  std::string_view fields[4];
  std::string_view dropped_key;
  /// Read a flat entry dict's opcodes in one go rather than one at a time through the stack (the same tree,
  /// in half the time; off only to compare the two).
  bool whole_entries = true;
};

/// @brief Limits that keep hostile input cheap; the defaults are far above what a memory snapshot holds.
struct pickle_limits {
  std::size_t max_string_bytes = 64u << 20;  // one string or bytes value
  std::size_t max_depth = 10'000;            // MARKs open at once
  std::size_t max_memo = 1u << 28;           // BINPUT / LONG_BINPUT index
};

/// @brief Reads one pickle: @p start holds its first bytes, already read; @p read gives the rest. Bytes after
/// the STOP opcode are an error. @p path names the input in errors.
/// @throws input_error "PATH: byte N: problem" for truncated, malformed or refused input.
pickle_tree read_pickle(std::string start, const pickle_read& read, const std::string& path,
                        const pickle_limits& limits = {}, const pickle_records* records = nullptr);

/// @brief True when @p bytes starts like a pickle of protocol 2 or later (PROTO, then the protocol number).
bool is_pickle(std::string_view bytes) noexcept;

}  // namespace vram::detail
