// Reading a command's trace files, and saying what the readers inferred.
#include "vram/cli/trace_inputs.hpp"

#include <fmt/format.h>

#include <sys/stat.h>

#include <iostream>

#include "vram/core/error.hpp"
#include "vram/trace/file_io.hpp"

namespace vram::cli {

void add_device_index_option(CLI::App* cmd, read_options& options) {
  cmd->add_option_function<int>(
      "--device-index",
      [&options](int d) {
        if (d < 0) throw usage_error(fmt::format("bad --device-index {}: a CUDA device number, 0 or more", d));
        options.device_index = d;
      },
      "Of a PyTorch snapshot with several devices, only device N (default: each device as its own trace)");
}

void print_notes(const std::string& path, const trace& t) {
  for (const auto& note : t.notes) std::cerr << fmt::format("note: {} ({}): {}\n", path, t.name, note);
}

void check_inputs(const std::vector<std::string>& paths) {
  for (const auto& path : paths) {
    // A pipe or another special file is left for its reader: opening and closing it here would end its
    // writer's stream before the command reads it.
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) continue;
    detail::input_file{path};  // the readers' own words for a missing file, a folder, one not readable
  }
}

std::vector<trace> read_input(const std::string& path, const read_options& options) {
  std::vector<trace> traces = read_traces(path, options);
  for (const auto& t : traces) print_notes(path, t);
  return traces;
}

}  // namespace vram::cli
