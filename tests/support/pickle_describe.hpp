#pragma once
// A pickle tree as text, to compare two trees whatever slots their containers took, and a pickle held whole
// in memory read into a tree or into that text. The text: None N, booleans T/F,
// ints in decimal, 'strings', b'bytes', [lists], (tuples), {dicts} with their keys and values, and records
// as R(tag,addr,size,stream,time_us) with '-' for a field the entry lacks. Shared values are written at each
// place they occur; @p limit bounds the text (a hand-made pickle can share a value with itself).

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

#include "vram/core/error.hpp"
#include "vram/trace/pickle.hpp"
#include "vram/trace/torch_snapshot.hpp"

namespace vram::test {

inline void describe(const detail::pickle_tree& t, detail::pickle_tree::ref r, std::string& out, std::size_t limit,
                     int depth = 0) {
  using k = detail::pickle_tree::kind;
  if (out.size() > limit || depth > 64) {
    out += "...";
    return;
  }
  switch (t.kind_of(r)) {
    case k::none: out += 'N'; return;
    case k::boolean: out += t.integer(r) != 0 ? 'T' : 'F'; return;
    case k::integer: out += std::to_string(t.integer(r)); return;
    case k::big_integer: out += "BIG"; return;
    case k::floating: out += std::to_string(t.floating(r)); return;
    case k::string: out += "'" + std::string(t.text(r)) + "'"; return;
    case k::bytes: out += "b'" + std::string(t.text(r)) + "'"; return;
    case k::record: {
      const auto& rec = t.record_of(r);
      out += "R(" + std::string(t.record_tag(r));
      for (int f = 0; f < 4; ++f) out += (rec.present & (1u << f)) != 0 ? "," + std::to_string(rec.fields[f]) : ",-";
      out += ')';
      return;
    }
    case k::list:
    case k::tuple:
    case k::dict: {
      const k kind = t.kind_of(r);
      out += kind == k::list ? '[' : kind == k::tuple ? '(' : '{';
      for (const auto item : t.items(r)) {
        describe(t, item, out, limit, depth + 1);
        out += ' ';
      }
      out += kind == k::list ? ']' : kind == k::tuple ? ')' : '}';
      return;
    }
  }
}

inline std::string describe(const detail::pickle_tree& t, std::size_t limit = std::size_t{1} << 20) {
  std::string out;
  describe(t, t.root(), out, limit);
  return out;
}

/// @brief Reads the pickle in @p bytes; errors name it @p path.
inline detail::pickle_tree parse_bytes(std::string_view bytes, const detail::pickle_limits& limits = {},
                                       const detail::pickle_records* records = nullptr,
                                       const std::string& path = "test.pickle") {
  std::size_t at = 0;
  const detail::pickle_read read = [&](char* out, std::size_t len) {
    const std::size_t n = std::min(len, bytes.size() - at);
    std::copy_n(bytes.data() + at, n, out);
    at += n;
    return n;
  };
  return detail::read_pickle({}, read, path, limits, records);
}

/// @brief The tree the snapshot reader makes of @p bytes (trace entries compacted, read whole or one opcode at
/// a time) as text, or "error: " and the message of the error that refused it.
inline std::string read_described(std::string_view bytes, bool whole_entries, const detail::pickle_limits& limits = {},
                                  const std::string& path = "test.pickle") {
  detail::pickle_records records = detail::snapshot_records();
  records.whole_entries = whole_entries;
  try {
    return describe(parse_bytes(bytes, limits, &records, path));
  } catch (const input_error& e) {
    return std::string("error: ") + e.what();
  }
}

}  // namespace vram::test
