// libFuzzer targets for the trace readers, one binary per reader, chosen at build time by VRAM_FUZZ_TARGET:
//   read_trace   the whole entry point, as `vram replay FILE` meets a file: format detection, gzip, every
//                reader (the input goes through a memfd, so read_trace opens it like any file);
//   torch_csv    rows after the torch header, parsed in memory;
//   rmm_csv      rows after the RMM header, parsed in memory;
//   vram_format  vram's binary format, parsed in memory;
//   snapshot     a PyTorch memory snapshot: the pickle machine, then the snapshot's meaning, in memory;
//   pickle_paths the pickle machine twice, reading trace entries whole and one opcode at a time: the same
//                tree (as text), or the same error, or the target traps.
// A reader may refuse its input (input_error) but never crash, overflow, leak, or take memory beyond what the
// events it holds need: scripts/fuzz runs each with AddressSanitizer, UBSan and an RSS limit.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "support/pickle_describe.hpp"
#include "vram/core/error.hpp"
#include "vram/trace/rmm_csv.hpp"
#include "vram/trace/pickle.hpp"
#include "vram/trace/text_source.hpp"
#include "vram/trace/torch_csv.hpp"
#include "vram/trace/torch_snapshot.hpp"
#include "vram/trace/trace_io.hpp"
#include "vram/trace/vram_format.hpp"

namespace {

const std::string name = "fuzz-input";

void read_through_a_file(std::string_view bytes) {
  static const int fd = memfd_create("vram-fuzz", 0);
  if (fd < 0 || ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0) return;
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
  (void)vram::read_traces("/proc/self/fd/" + std::to_string(fd));
}

void parse_csv(std::string_view header, std::string_view rows, bool torch) {
  std::string text(header);
  text += rows;
  vram::detail::text_source src(text, name);
  if (torch) (void)vram::detail::parse_torch_csv(src, name);
  else (void)vram::detail::parse_rmm_csv(src, name);
}

void parse_snapshot(std::string_view bytes) {
  const auto tree = vram::test::parse_bytes(bytes, {}, &vram::detail::snapshot_records(), name);
  (void)vram::detail::read_torch_snapshot(tree, name);
}

// The tree read whole and one opcode at a time (each as text, or the error's message) must be the same.
void compare_paths(std::string_view bytes) {
  using vram::test::read_described;
  if (read_described(bytes, true, {}, name) != read_described(bytes, false, {}, name)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
#if VRAM_FUZZ_TARGET == 0
    read_through_a_file(bytes);
#elif VRAM_FUZZ_TARGET == 1
    parse_csv("time_us,action,addr,size,stream\n", bytes, true);
#elif VRAM_FUZZ_TARGET == 2
    parse_csv("Thread,Time,Action,Pointer,Size,Stream\n", bytes, false);
#elif VRAM_FUZZ_TARGET == 3
    (void)vram::detail::parse_vram_format(bytes, name);
#elif VRAM_FUZZ_TARGET == 4
    parse_snapshot(bytes);
#else
    compare_paths(bytes);
#endif
  } catch (const vram::input_error&) {  // refusing bad input is the job; anything else escapes and is a finding
  }
  return 0;
}
