#pragma once
// Writes plain Python values as a protocol-4 pickle, the opcodes Python's own pickler uses for them
// (memoized containers and strings, batched APPENDS / SETITEMS, the smallest integer opcode), so that tests
// can build PyTorch-style memory snapshots by hand. Test support only: vram itself never writes pickles.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace vram::test {

struct py {
  enum class kind { none, boolean, integer, floating, string, list, dict } k = kind::none;
  std::int64_t i = 0;
  double d = 0;
  std::string s;
  std::vector<py> items;  // a list's items; a dict's keys and values, alternating

  py() = default;
  py(int v) : k(kind::integer), i(v) {}  // NOLINT: literals read as Python values
  py(std::int64_t v) : k(kind::integer), i(v) {}
  py(std::uint64_t v) : k(kind::integer), i(static_cast<std::int64_t>(v)) {}
  py(double v) : k(kind::floating), d(v) {}
  py(const char* v) : k(kind::string), s(v) {}
  py(std::string v) : k(kind::string), s(std::move(v)) {}
  static py boolean(bool b) {
    py p;
    p.k = kind::boolean;
    p.i = b;
    return p;
  }
  static py list(std::vector<py> v) {
    py p;
    p.k = kind::list;
    p.items = std::move(v);
    return p;
  }
  /// @brief A dict from alternating keys and values: dict({"a", 1, "b", 2}).
  static py dict(std::vector<py> kv) {
    py p;
    p.k = kind::dict;
    p.items = std::move(kv);
    return p;
  }
};

namespace detail_pickle {

// Strings already written, by value, and their memo indexes: with it, a string written again is fetched from
// the memo (BINGET / LONG_BINGET), as Python's pickler does when the same str object recurs.
struct memo_state {
  bool share_strings = false;
  std::uint64_t next = 0;  // the memo index MEMOIZE gives next
  std::vector<std::pair<std::string, std::uint64_t>> strings;  // sorted by value
};

inline void put_le(std::string& out, std::uint64_t v, int n) {
  for (int b = 0; b < n; ++b) out += static_cast<char>((v >> (8 * b)) & 0xff);
}

inline void write(std::string& out, const py& v, memo_state& memo) {
  switch (v.k) {
    case py::kind::none:
      out += 'N';
      return;
    case py::kind::boolean:
      out += static_cast<char>(v.i ? 0x88 : 0x89);
      return;
    case py::kind::integer:
      if (v.i >= 0 && v.i < 256) {
        out += 'K';
        put_le(out, static_cast<std::uint64_t>(v.i), 1);
      } else if (v.i >= 0 && v.i < 65536) {
        out += 'M';
        put_le(out, static_cast<std::uint64_t>(v.i), 2);
      } else if (v.i >= INT32_MIN && v.i <= INT32_MAX) {
        out += 'J';
        put_le(out, static_cast<std::uint64_t>(v.i), 4);
      } else {  // LONG1: the fewest two's-complement bytes that keep the sign
        int n = 8;
        while (n > 1) {
          const std::int64_t top = v.i >> (8 * (n - 1) - 1);
          if (top != 0 && top != -1) break;
          --n;
        }
        out += static_cast<char>(0x8a);
        out += static_cast<char>(n);
        put_le(out, static_cast<std::uint64_t>(v.i), n);
      }
      return;
    case py::kind::floating: {
      std::uint64_t bits = 0;
      std::memcpy(&bits, &v.d, 8);
      out += 'G';
      for (int b = 7; b >= 0; --b) out += static_cast<char>((bits >> (8 * b)) & 0xff);
      return;
    }
    case py::kind::string: {
      auto at = std::lower_bound(memo.strings.begin(), memo.strings.end(), std::pair<std::string, std::uint64_t>{v.s, 0});
      if (memo.share_strings && at != memo.strings.end() && at->first == v.s) {
        if (at->second < 256) {
          out += 'h';  // BINGET
          put_le(out, at->second, 1);
        } else {
          out += 'j';  // LONG_BINGET
          put_le(out, at->second, 4);
        }
        return;
      }
      if (memo.share_strings) memo.strings.insert(at, {v.s, memo.next});
      if (v.s.size() < 256) {
        out += static_cast<char>(0x8c);
        put_le(out, v.s.size(), 1);
      } else {
        out += 'X';
        put_le(out, v.s.size(), 4);
      }
      out += v.s;
      out += static_cast<char>(0x94);  // MEMOIZE
      ++memo.next;
      return;
    }
    case py::kind::list:
    case py::kind::dict: {
      const bool list = v.k == py::kind::list;
      out += list ? ']' : '}';
      out += static_cast<char>(0x94);
      ++memo.next;
      const std::size_t step = list ? 1000 : 2000;  // Python batches 1000 items (or pairs) per opcode
      for (std::size_t at = 0; at < v.items.size(); at += step) {
        const std::size_t end = std::min(v.items.size(), at + step);
        if (end - at == (list ? 1u : 2u)) {  // one item (or pair): APPEND / SETITEM, with no MARK
          for (std::size_t j = at; j < end; ++j) write(out, v.items[j], memo);
          out += list ? 'a' : 's';
          continue;
        }
        out += '(';
        for (std::size_t j = at; j < end; ++j) write(out, v.items[j], memo);
        out += list ? 'e' : 'u';
      }
      return;
    }
  }
}

}  // namespace detail_pickle

/// @brief The protocol-4 pickle of @p v, as pickle.dumps(v, protocol=4) writes it, less the FRAME opcode.
/// Each string is its own object unless @p share_strings: then equal strings are one object, written once
/// and fetched from the memo after (PyTorch's snapshots share their keys and action names that way).
inline std::string pickle(const py& v, bool share_strings = false) {
  std::string out("\x80\x04", 2);
  detail_pickle::memo_state memo;
  memo.share_strings = share_strings;
  detail_pickle::write(out, v, memo);
  out += '.';
  return out;
}

}  // namespace vram::test
