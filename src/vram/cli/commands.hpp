#pragma once
// The subcommands of the `vram` tool; each file adds one to the app.

#include <charconv>
#include <cstdint>
#include <string>
#include <vector>

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
void add_record_command(CLI::App& app);
void add_report_command(CLI::App& app);

/// @brief The arguments as typed, with "--" put before the program of `vram record PROGRAM ARGS...` where it
/// is missing: the first word that is neither an option of vram record nor an option's value. The program's
/// own options ("-o", "--json") are then its own, as after "--". Other commands' arguments are as typed.
std::vector<std::string> with_record_separator(const CLI::App& app, int argc, char** argv);

/// @brief For an option whose absence means a default: given empty ("--sizes ''"), it is refused rather than
/// taken for absent.
inline const CLI::Validator given_a_value{
    [](std::string& s) -> std::string { return s.empty() ? "was given no value" : ""; }, "", "given_a_value"};

/// @brief For an option read into a std::uint64_t (a seed): digits only, and within 64 bits. CLI11 alone
/// would read "-1", or a number past 2^64 - 1, as 2^64 - 1 without a word.
inline const CLI::Validator whole_number{[](std::string& s) -> std::string {
                                           std::uint64_t v = 0;
                                           const auto* end = s.data() + s.size();
                                           const auto [p, ec] = std::from_chars(s.data(), end, v);
                                           if (s.empty() || ec != std::errc{} || p != end)
                                             return "'" + s + "': want a whole number from 0 to 18446744073709551615";
                                           return {};
                                         },
                                         ""};

/// @brief --device's help where a command takes the GPU or the simulated device in any of its forms.
inline constexpr const char* device_help =
    "auto, sim, sim:CAPACITY (e.g. sim:80GiB), with ,costs=lent or ,costs=FILE.json (a card's own costs) and "
    ",lag=5ms (a device behind the host) after sim or its capacity, cuda or cuda:N";

/// @brief The exit status a command asks for after it ran to the end: 0, or 3 when `replay` saw allocations
/// fail (docs/cli.md, "Exit status"). Errors that stop a command are exceptions, handled in main().
inline int finished_status = 0;
/// @brief The status `replay` ends with when an allocation failed.
inline constexpr int status_allocations_failed = 3;

}  // namespace vram::cli
