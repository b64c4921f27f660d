// Reads pickles as the snapshot reader does (trace entries compacted into records, their frames dropped) and
// writes each tree as text (pickle_describe.hpp), so that tests/pickle_vs_python.py can compare it with what
// Python's own unpickler reads from the same bytes:
//   pickle_dump IN OUT [IN OUT ...]
// writes OUT (entries read whole, the fast path) and OUT.slow (one opcode at a time); a refused input writes
// "error: ..." instead of a tree.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "support/pickle_describe.hpp"
#include "vram/core/error.hpp"
#include "vram/trace/pickle.hpp"
#include "vram/trace/torch_snapshot.hpp"

namespace {

std::string read_described(const std::string& bytes, bool whole_entries) {
  vram::detail::pickle_records records = vram::detail::snapshot_records();
  records.whole_entries = whole_entries;
  std::size_t at = 0;
  const vram::detail::pickle_read read = [&](char* out, std::size_t len) {
    const std::size_t n = std::min(len, bytes.size() - at);
    std::copy_n(bytes.data() + at, n, out);
    at += n;
    return n;
  };
  try {
    return vram::test::describe(vram::detail::read_pickle({}, read, "in.pickle", {}, &records));
  } catch (const vram::input_error& e) {
    return std::string("error: ") + e.what();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc % 2 == 0) {
    std::cerr << "usage: pickle_dump IN OUT [IN OUT ...]\n";
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::cerr << "pickle_dump: cannot read " << argv[i] << "\n";
      return 1;
    }
    std::ostringstream bytes;
    bytes << in.rdbuf();
    const std::string out = argv[i + 1];
    std::ofstream(out, std::ios::binary) << read_described(bytes.str(), true);
    std::ofstream(out + ".slow", std::ios::binary) << read_described(bytes.str(), false);
  }
  return 0;
}
