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
    std::ofstream(out, std::ios::binary) << vram::test::read_described(bytes.str(), true);
    std::ofstream(out + ".slow", std::ios::binary) << vram::test::read_described(bytes.str(), false);
  }
  return 0;
}
