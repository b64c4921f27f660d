#pragma once
// A pickle tree as text, to compare two trees whatever slots their containers took: None N, booleans T/F,
// ints in decimal, 'strings', b'bytes', [lists], (tuples), {dicts} with their keys and values, and records
// as R(tag,addr,size,stream,time_us) with '-' for a field the entry lacks. Shared values are written at each
// place they occur; @p limit bounds the text (a hand-made pickle can share a value with itself).

#include <cstddef>
#include <string>

#include "vram/trace/pickle.hpp"

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

}  // namespace vram::test
