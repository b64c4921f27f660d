// Trace parsing speed, in events per second (the items/s column): the recorded gpt2 trace as the shared
// csv.gz, as plain CSV and as vram's own format (plain and gzip), and a synthetic trace of one million
// events (seeded) in the same forms, so the figures exist on a machine without shared/traces.
//
// The files are written once to a temporary folder; each iteration is one read_trace of the whole file
// (the page cache holds it), or, for the *_in_memory cases, one parse of bytes already in memory.
// Set VRAM_SHARED_TRACES in the environment to read the recorded traces from another folder. The synthetic
// trace is also written as a PyTorch memory snapshot (a pickle), and VRAM_BENCH_SNAPSHOTS=PATH[:PATH...]
// adds real snapshots, each read as it is and converted to vram's format, side by side. Each pickle is also
// walked (walk_opcodes/...): its opcodes stepped over in memory, nothing kept, the floor under any reader.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "support/pickle_writer.hpp"
#include "vram/trace/file_io.hpp"
#include "vram/trace/text_source.hpp"
#include "vram/trace/torch_csv.hpp"
#include "vram/trace/trace.hpp"
#include "vram/trace/trace_io.hpp"
#include "vram/trace/vram_format.hpp"

namespace {

std::string shared_dir() {
  const char* env = std::getenv("VRAM_SHARED_TRACES");
  return env != nullptr ? env : VRAM_SHARED_TRACES;
}

std::filesystem::path scratch_dir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("vram_trace_bench_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(std::filesystem::temp_directory_path() /
                                      ("vram_trace_bench_" + std::to_string(::getpid())),
                                  ec);
    });
    return d;
  }();
  return dir;
}

// A serving-like synthetic trace: blocks of 512 B to 64 MiB live for a while, each freed (requested,
// then completed) in the order a FIFO of 4,096 live blocks gives; times advance 1 to 64 us an event.
vram::trace synthetic_trace(std::size_t events) {
  std::mt19937_64 rng(20240611);
  std::uniform_int_distribution<int> log_size(9, 26);
  std::uniform_int_distribution<int> step(1, 64);
  vram::trace t;
  t.name = "synthetic";
  t.events.reserve(events);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> live;  // ring of (addr, size)
  std::size_t head = 0;
  std::int64_t now = 1'000'000;
  std::uint64_t next_addr = 0x7f0000000000;
  while (t.events.size() + 3 <= events) {
    now += step(rng);
    if (live.size() < 4096) {
      const std::uint64_t size = std::uint64_t{1} << log_size(rng);
      t.events.push_back({now, next_addr, size, 0, vram::trace_action::alloc});
      live.emplace_back(next_addr, size);
      next_addr += (size + 511) / 512 * 512;
    } else {
      const auto [addr, size] = live[head];
      t.events.push_back({now, addr, size, 0, vram::trace_action::free_requested});
      t.events.push_back({now + 1, addr, size, 0, vram::trace_action::free_completed});
      const std::uint64_t new_size = std::uint64_t{1} << log_size(rng);
      t.events.push_back({now + 2, addr, new_size, 0, vram::trace_action::alloc});
      live[head] = {addr, new_size};
      head = (head + 1) % live.size();
      now += 2;
    }
  }
  return t;
}

void read_file_bench(benchmark::State& state, const std::string& path) {
  std::size_t events = 0;
  for (auto _ : state) {
    vram::trace t = vram::read_trace(path);
    events = t.events.size();
    benchmark::DoNotOptimize(t.events.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * events));
  state.counters["events"] = static_cast<double>(events);
  state.counters["file_MB"] = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
}

// Registers read benchmarks of @p t written in each form, named "<what>/<form>".
void register_forms(const std::string& what, const vram::trace& t) {
  const struct {
    const char* suffix;
    vram::trace_format format;
  } forms[] = {{"csv", vram::trace_format::torch},
               {"csv.gz", vram::trace_format::torch},
               {"vram", vram::trace_format::vram},
               {"vram.gz", vram::trace_format::vram}};
  for (const auto& f : forms) {
    const std::string path = (scratch_dir() / (what + "." + f.suffix)).string();
    vram::write_trace(path, t, f.format);
    benchmark::RegisterBenchmark(("read_trace/" + what + "/" + f.suffix).c_str(),
                                 [path](benchmark::State& s) { read_file_bench(s, path); })
        ->Unit(benchmark::kMillisecond);
  }
}

// The snapshot PyTorch would write for @p t: one dict per entry with the keys PyTorch 2.11 writes (frames
// empty, as with context=None), one device, no segments. Its keys and action names are shared objects, so
// the pickle fetches them from the memo after their first time, as in a snapshot PyTorch writes.
std::string synthetic_snapshot(const vram::trace& t) {
  using vram::test::py;
  std::vector<py> entries;
  entries.reserve(t.events.size());
  for (const auto& e : t.events)
    entries.push_back(py::dict({"action", std::string(vram::to_string(e.action)), "addr", e.addr, "size", e.size,
                                "stream", e.stream, "time_us", e.time_us, "compile_context", "N/A", "user_metadata", "",
                                "frames", py::list({})}));
  return vram::test::pickle(py::dict({"segments", py::list({}), "device_traces", py::list({py::list(std::move(entries))})}),
                           /*share_strings=*/true);
}

// The least any reader of a pickle does: step over each opcode and its argument, reading only the lengths, and
// keep nothing. An opcode's argument has a length of its own, so the next opcode is found only by reading this
// one: this is the floor under the snapshot reader's time. Returns the count of opcodes; throws at an opcode
// that snapshots do not hold.
std::size_t walk_opcodes(std::string_view b) {
  std::size_t p = 0, ops = 0;
  auto length = [&](std::size_t n) {
    if (b.size() - p < n) throw std::runtime_error("walk_opcodes: the pickle ends inside a length");
    std::uint64_t v = 0;
    std::memcpy(&v, b.data() + p, n);  // little-endian
    p += n;
    return v;
  };
  while (p < b.size()) {
    const auto op = static_cast<unsigned char>(b[p++]);
    ++ops;
    switch (op) {
      case 0x80: case 'K': case 'h': case 'q': p += 1; break;      // PROTO, BININT1, BINGET, BINPUT
      case 'M': p += 2; break;                                        // BININT2
      case 'J': case 'j': case 'r': p += 4; break;                    // BININT, LONG_BINGET, LONG_BINPUT
      case 0x95: case 'G': p += 8; break;                             // FRAME, BINFLOAT
      case 0x8a: case 0x8c: case 'C': p += length(1); break;          // LONG1, SHORT_BINUNICODE, SHORT_BINBYTES
      case 0x8b: case 'X': case 'B': p += length(4); break;           // LONG4, BINUNICODE, BINBYTES
      case 0x8d: case 0x8e: p += length(8); break;                    // BINUNICODE8, BINBYTES8
      case '.': return ops;                                           // STOP
      case '}': case ']': case ')': case '(': case 0x94: case 'u': case 's': case 'a': case 'e': case 't':
      case 'l': case 'd': case 0x85: case 0x86: case 0x87: case 'N': case 0x88: case 0x89: case '0': case '2': case '1':
        break;                                                        // no argument
      default: throw std::runtime_error("walk_opcodes: opcode " + std::to_string(op) + " is not a snapshot's");
    }
  }
  return ops;
}

// The floor above for the pickle @p bytes (not compressed), per event of its trace: "walk_opcodes/<what>/snapshot".
void register_walk(const std::string& what, std::shared_ptr<const std::string> bytes, std::size_t events) {
  if (bytes->empty() || static_cast<unsigned char>((*bytes)[0]) != 0x80) return;  // compressed: not walked
  benchmark::RegisterBenchmark(("walk_opcodes/" + what + "/snapshot").c_str(),
                               [bytes, events](benchmark::State& s) {
                                 std::size_t ops = 0;
                                 for (auto _ : s) {
                                   ops = walk_opcodes(*bytes);
                                   benchmark::DoNotOptimize(ops);
                                 }
                                 s.SetItemsProcessed(static_cast<std::int64_t>(s.iterations() * events));
                                 s.counters["opcodes_per_event"] = static_cast<double>(ops) / static_cast<double>(events);
                               })
      ->Unit(benchmark::kMillisecond);
}

// Each snapshot in VRAM_BENCH_SNAPSHOTS (paths separated by ':') read as it is and as vram's format, and walked.
void register_snapshots() {
  const char* env = std::getenv("VRAM_BENCH_SNAPSHOTS");
  if (env == nullptr) return;
  std::string list = env;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t end = std::min(list.find(':', at), list.size());
    const std::string path = list.substr(at, end - at);
    at = end + 1;
    if (path.empty()) continue;
    const vram::trace t = vram::read_trace(path);
    const std::string name = t.name;
    benchmark::RegisterBenchmark(("read_trace/" + name + "/snapshot").c_str(),
                                 [path](benchmark::State& s) { read_file_bench(s, path); })
        ->Unit(benchmark::kMillisecond);
    const std::string as_vram = (scratch_dir() / (name + ".vram")).string();
    vram::write_trace(as_vram, t, vram::trace_format::vram);
    benchmark::RegisterBenchmark(("read_trace/" + name + "/vram").c_str(),
                                 [as_vram](benchmark::State& s) { read_file_bench(s, as_vram); })
        ->Unit(benchmark::kMillisecond);
    register_walk(name, std::make_shared<const std::string>(vram::detail::read_file_bytes(path)), t.events.size());
  }
}

void register_all() {
  register_snapshots();
  const std::string gpt2 = shared_dir() + "/gpt2_generate.csv.gz";
  if (std::filesystem::exists(gpt2)) {
    benchmark::RegisterBenchmark("read_trace/gpt2/shared_csv.gz",
                                 [gpt2](benchmark::State& s) { read_file_bench(s, gpt2); })
        ->Unit(benchmark::kMillisecond);
    register_forms("gpt2", vram::read_trace(gpt2));
  }

  const vram::trace synth = synthetic_trace(1'000'000);
  register_forms("synthetic", synth);
  const std::string snapshot_path = (scratch_dir() / "synthetic.pickle").string();
  auto snapshot_bytes = std::make_shared<const std::string>(synthetic_snapshot(synth));
  vram::detail::write_file_bytes(snapshot_path, *snapshot_bytes);
  benchmark::RegisterBenchmark("read_trace/synthetic/snapshot",
                               [snapshot_path](benchmark::State& s) { read_file_bench(s, snapshot_path); })
      ->Unit(benchmark::kMillisecond);
  register_walk("synthetic", std::move(snapshot_bytes), synth.events.size());

  // Parsing alone, from bytes already in memory (no file read, no page cache).
  const std::string path = (scratch_dir() / "synthetic_mem.vram").string();
  vram::write_trace(path, synth, vram::trace_format::vram);
  auto vram_bytes = std::make_shared<std::string>(vram::detail::read_file_bytes(path));
  benchmark::RegisterBenchmark("decode_in_memory/synthetic/vram",
                               [vram_bytes](benchmark::State& s) {
                                 std::size_t n = 0;
                                 for (auto _ : s) {
                                   auto events = vram::detail::parse_vram_format(*vram_bytes, "memory");
                                   n = events.size();
                                   benchmark::DoNotOptimize(events.data());
                                 }
                                 s.SetItemsProcessed(static_cast<std::int64_t>(s.iterations() * n));
                               })
      ->Unit(benchmark::kMillisecond);
  auto csv_text = std::make_shared<std::string>(vram::detail::format_torch_csv(synth));
  benchmark::RegisterBenchmark("decode_in_memory/synthetic/csv",
                               [csv_text](benchmark::State& s) {
                                 std::size_t n = 0;
                                 const std::string name = "memory";
                                 for (auto _ : s) {
                                   vram::detail::text_source src(*csv_text, name);
                                   auto events = vram::detail::parse_torch_csv(src, name);
                                   n = events.size();
                                   benchmark::DoNotOptimize(events.data());
                                 }
                                 s.SetItemsProcessed(static_cast<std::int64_t>(s.iterations() * n));
                               })
      ->Unit(benchmark::kMillisecond);
}

const int registered = [] {
  try {
    register_all();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trace_parse_bench: cannot prepare the trace files: %s\n", e.what());
  }
  return 0;
}();

}  // namespace
