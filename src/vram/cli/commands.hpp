#pragma once
// The subcommands of the `vram` tool; each file adds one to the app.

#include <CLI/CLI.hpp>

namespace vram::cli {

void add_replay_command(CLI::App& app);
void add_fit_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_check_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_probe_command(CLI::App& app);
void add_soak_command(CLI::App& app);
void add_bench_command(CLI::App& app);

}  // namespace vram::cli
