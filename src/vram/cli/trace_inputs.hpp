#pragma once
// The trace files a command reads: every file's traces (one per device of a PyTorch snapshot), with what
// the readers inferred printed to standard error, and the --device-index option that picks a snapshot's
// device. Shared by replay, fit, check and convert.

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "vram/trace/trace_io.hpp"

namespace vram::cli {

/// @brief Adds `--device-index N` to @p cmd, stored in @p options.
void add_device_index_option(CLI::App* cmd, read_options& options);

/// @brief Prints what the reader inferred of @p t, read from @p path, on standard error: "note: PATH (NAME): ...".
void print_notes(const std::string& path, const trace& t);

/// @brief Opens each of @p paths and closes it, so that a missing file, a folder or one this user may not
/// read fails before a command spends minutes on the files before it. @throws input_error as the readers do.
void check_inputs(const std::vector<std::string>& paths);

/// @brief The traces in @p path; each note the reader made goes to standard error as "note: PATH: ...".
std::vector<trace> read_input(const std::string& path, const read_options& options);

}  // namespace vram::cli
