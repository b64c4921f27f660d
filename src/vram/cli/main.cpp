// The `vram` command-line tool: replay, fit, simulate, convert, demo. Errors print one line naming the
// problem and exit non-zero: 1 for bad input or a failed run, 2 for bad arguments.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "vram/cli/commands.hpp"
#include "vram/core/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"vram: a GPU device-memory manager, and the tools to see and measure GPU memory"};
  app.require_subcommand(1);
  vram::cli::add_replay_command(app);
  vram::cli::add_fit_command(app);
  vram::cli::add_simulate_command(app);
  vram::cli::add_convert_command(app);
  vram::cli::add_demo_command(app);
  vram::cli::add_check_command(app);
  vram::cli::add_info_command(app);
  vram::cli::add_probe_command(app);
  vram::cli::add_soak_command(app);
  vram::cli::add_bench_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help); its own codes (104 for a value it cannot convert, ...) become
    // the 2 that every bad argument exits with.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const vram::usage_error& e) {
    std::fprintf(stderr, "vram: %s\n", e.what());
    return 2;
  } catch (const vram::error& e) {
    std::fprintf(stderr, "vram: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vram: unexpected error: %s\n", e.what());
    return 1;
  }
  return 0;
}
