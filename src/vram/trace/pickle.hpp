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

namespace vram::detail {

/// @brief The tree a pickle holds.
class pickle_tree {
 public:
  using ref = std::uint32_t;
  enum class kind : std::uint8_t { none, boolean, integer, big_integer, floating, string, bytes, list, tuple, dict };

  ref root() const noexcept { return root_; }
  kind kind_of(ref r) const noexcept { return nodes_[r].k; }
  /// @brief The value of an integer (or boolean) node. pre: kind_of(r) is integer or boolean.
  std::int64_t integer(ref r) const noexcept { return nodes_[r].i; }
  double floating(ref r) const noexcept;
  /// @brief The text of a string or bytes node.
  std::string_view text(ref r) const noexcept { return strings_[nodes_[r].aux]; }
  /// @brief A list's or tuple's items; a dict's keys and values, alternating.
  std::span<const ref> items(ref r) const noexcept { return containers_[nodes_[r].aux]; }
  /// @brief The value under string key @p key in dict @p d, if any. pre: kind_of(d) == kind::dict.
  std::optional<ref> find(ref d, std::string_view key) const noexcept;
  std::size_t node_count() const noexcept { return nodes_.size(); }

  /// @brief The name of a kind with its article ("a dict", "an int", "None"), for errors.
  static std::string_view name(kind k) noexcept;

 private:
  friend class pickle_machine;
  struct node {
    kind k = kind::none;
    std::uint32_t aux = 0;  // string or container index
    std::int64_t i = 0;     // integer value, or a double's bits
  };
  std::vector<node> nodes_;
  std::vector<std::vector<ref>> containers_;
  std::deque<std::string> strings_;  // a deque: interned views stay valid as it grows
  std::unordered_map<std::string_view, std::uint32_t> interned_;
  ref root_ = 0;
};

/// @brief Reads up to len bytes into out; returns how many (0 at the end). May throw input_error.
using pickle_read = std::function<std::size_t(char* out, std::size_t len)>;

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
                        const pickle_limits& limits = {});

/// @brief True when @p bytes starts like a pickle of protocol 2 or later (PROTO, then the protocol number).
bool is_pickle(std::string_view bytes) noexcept;

}  // namespace vram::detail
