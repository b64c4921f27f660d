// Trace input and output: exact events from small hand-made files in tests/data, round trips between the
// formats, one input_error per kind of bad input (naming the file, the line and the problem), corrupt and
// truncated gzip and vram files, check_trace on a hand-made trace, and the shared recorded traces.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cctype>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "vram/core/error.hpp"
#include "vram/trace/trace.hpp"
#include "vram/trace/trace_check.hpp"
#include "vram/trace/file_io.hpp"
#include "vram/trace/trace_io.hpp"

namespace vram {
namespace {

using ::testing::HasSubstr;

const std::string data_dir = VRAM_TEST_DATA;
const std::string shared_dir = VRAM_SHARED_TRACES;

std::string data(const std::string& name) { return data_dir + "/" + name; }

// A scratch folder of this test binary's own, removed at exit.
class scratch {
 public:
  scratch() : dir_(std::filesystem::path(::testing::TempDir()) / ("vram_trace_io_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir_);
  }
  ~scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  std::filesystem::path dir_;
};

scratch& tmp() {
  static scratch s;
  return s;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

trace_event ev(std::int64_t t, trace_action a, std::uint64_t addr, std::uint64_t size, std::uint64_t stream = 0) {
  trace_event e;
  e.time_us = t;
  e.action = a;
  e.addr = addr;
  e.size = size;
  e.stream = stream;
  return e;
}

bool same_event(const trace_event& a, const trace_event& b) {
  return a.time_us == b.time_us && a.action == b.action && a.addr == b.addr && a.size == b.size &&
         a.stream == b.stream;
}

MATCHER_P(events_are, expected, "") {
  if (arg.size() != expected.size()) {
    *result_listener << "has " << arg.size() << " events, expected " << expected.size();
    return false;
  }
  for (std::size_t i = 0; i < arg.size(); ++i) {
    if (!same_event(arg[i], expected[i])) {
      *result_listener << "differs at event " << i << ": time " << arg[i].time_us << " "
                       << to_string(arg[i].action) << " addr " << arg[i].addr << " size " << arg[i].size
                       << " stream " << arg[i].stream;
      return false;
    }
  }
  return true;
}

// The input_error message read_trace throws for @p path ("" when none is thrown).
std::string read_error(const std::string& path) {
  try {
    read_trace(path);
  } catch (const input_error& e) {
    return e.what();
  }
  return "";
}

const std::vector<trace_event> torch_small_events = {
    ev(1000, trace_action::segment_alloc, 4096000, 2097152),
    ev(1001, trace_action::alloc, 4096000, 1024),
    ev(1005, trace_action::alloc, 4097024, 512, 7),
    ev(1010, trace_action::free_requested, 4096000, 1024),
    ev(1012, trace_action::free_completed, 4096000, 1024),
    ev(1020, trace_action::segment_map, 8192000, 2097152),
    ev(1021, trace_action::segment_unmap, 8192000, 2097152),
    ev(1030, trace_action::oom, 0, 4294967296),
    ev(1031, trace_action::snapshot, 0, 0),
    ev(1040, trace_action::segment_free, 4096000, 2097152),
};

// ---------------------------------------------------------------------------------------------------------
// Good input

TEST(trace_io, reads_every_torch_action_exactly) {
  const trace t = read_trace(data("torch_small.csv"));
  EXPECT_EQ(t.name, "torch_small");
  EXPECT_THAT(t.events, events_are(torch_small_events));
  EXPECT_DOUBLE_EQ(t.seconds(), 40e-6);  // 1040 - 1000 us
}

TEST(trace_io, gzip_and_plain_give_the_same_events) {
  EXPECT_THAT(read_trace(data("torch_small.csv.gz")).events, events_are(torch_small_events));
}

TEST(trace_io, crlf_blank_lines_and_a_missing_last_newline_are_read) {
  const std::string p = tmp().path("crlf.csv");
  spit(p, "time_us,action,addr,size,stream\r\n\r\n5,alloc,64,8,0\r\n\r\n6,free_requested,64,8,0");
  EXPECT_THAT(read_trace(p).events, events_are(std::vector{ev(5, trace_action::alloc, 64, 8),
                                                            ev(6, trace_action::free_requested, 64, 8)}));
}

TEST(trace_io, blank_lines_before_the_header_are_skipped_as_any_blank_line) {
  // The parsers skip blank lines before the header too; the format is judged by the first line that is not
  // blank, so a leading "\n" or "\r\n" does not make the file "unknown".
  const std::string torch = tmp().path("lead.csv");
  spit(torch, "\n\r\ntime_us,action,addr,size,stream\n5,alloc,64,8,0\n");
  EXPECT_THAT(read_trace(torch).events, events_are(std::vector{ev(5, trace_action::alloc, 64, 8)}));
  const std::string rmm = tmp().path("lead_rmm.csv");
  spit(rmm, "\r\nThread,Time,Action,Pointer,Size,Stream\r\n1,00:00:01.000000,allocate,0x40,8,0x0\r\n");
  EXPECT_THAT(read_trace(rmm).events, events_are(std::vector{ev(1'000'000, trace_action::alloc, 64, 8)}));
  // Blank lines only: an empty file; anything else is named at its own line, the third here.
  const std::string blank = tmp().path("blank.csv");
  spit(blank, "\n\r\n\n");
  EXPECT_EQ(read_error(blank), blank + ":1: empty file (blank lines only), expected the header "
                                       "time_us,action,addr,size,stream");
  const std::string other = tmp().path("other.csv");
  spit(other, "\n\nhello,world\n");
  EXPECT_THAT(read_error(other), HasSubstr(other + ":3: unknown trace format: the first line 'hello,world'"));
}

TEST(trace_io, reads_rmm_log_across_midnight) {
  // 23:59:59.999000 = 86,399.999 s; 00:00:00.000250 the next day = 86,400,000,250 us; the failure row
  // (00:00:00.000200) was logged 50 us early by another thread and takes the time of the row before.
  const trace t = read_trace(data("rmm_small.csv"));
  EXPECT_THAT(t.events, events_are(std::vector{
                            ev(86'399'999'000, trace_action::alloc, 0x7f8a40000000, 1024, 0),
                            ev(86'399'999'500, trace_action::alloc, 0x7f8a40000400, 2048, 0x7f8a38001020),
                            ev(86'400'000'250, trace_action::free_requested, 0x7f8a40000000, 1024, 0),
                            ev(86'400'000'250, trace_action::oom, 0, 1099511627776, 0),
                        }));
}

TEST(trace_io, reads_rmm_hex_without_prefix_and_short_fractions) {
  // 10:00:00.000001 = 36,000,000,001 us; 10:00:00.5 = 36,000,500,000 us.
  EXPECT_THAT(read_trace(data("rmm_bare_hex.csv")).events,
              events_are(std::vector{ev(36'000'000'001, trace_action::alloc, 0x7f0000000000, 256),
                                     ev(36'000'500'000, trace_action::free_requested, 0x7f0000000000, 256)}));
}

TEST(trace_io, format_names_round_trip) {
  for (const trace_format f : {trace_format::torch, trace_format::rmm, trace_format::vram})
    EXPECT_EQ(parse_trace_format(to_string(f)), f);
  EXPECT_THROW(parse_trace_format("csv"), usage_error);
  EXPECT_EQ(to_string(trace_action::free_completed), "free_completed");
}

TEST(trace_io, a_csv_name_asks_for_torch_and_any_other_for_vram) {
  EXPECT_EQ(format_for_name("run.csv"), trace_format::torch);
  EXPECT_EQ(format_for_name("dir.vram/run.csv.gz"), trace_format::torch);
  EXPECT_EQ(format_for_name("run.vram"), trace_format::vram);
  EXPECT_EQ(format_for_name("run.vram.gz"), trace_format::vram);
  EXPECT_EQ(format_for_name("run.gz"), trace_format::vram);
  EXPECT_EQ(format_for_name("csv"), trace_format::vram);
  EXPECT_EQ(format_for_name("run.csv.vram"), trace_format::vram);
  EXPECT_EQ(format_for_name("RUN.CSV"), trace_format::torch);
  EXPECT_EQ(format_for_name("run.Csv.GZ"), trace_format::torch);
}

TEST(trace_io, leading_zeros_are_read_by_the_slow_path) {
  // 23 digits for addr: more than the fast path takes, still the number 64.
  const std::string p = tmp().path("zeros.csv");
  spit(p, "time_us,action,addr,size,stream\n0001,alloc,00000000000000000000064,8,0\n");
  EXPECT_THAT(read_trace(p).events, events_are(std::vector{ev(1, trace_action::alloc, 64, 8)}));
}

// 100,000 rows of about 30 bytes: 3 MB of text, so pieces of 1 MiB end inside rows.
trace many_rows() {
  trace t;
  for (std::int64_t i = 0; i < 100'000; ++i)
    t.events.push_back(ev(i, i % 2 == 0 ? trace_action::alloc : trace_action::free_requested,
                          static_cast<std::uint64_t>(i / 2) * 512, static_cast<std::uint64_t>(i % 7) + 1));
  return t;
}

TEST(trace_io, rows_across_piece_boundaries_are_read_whole) {
  const trace t = many_rows();
  for (const char* name : {"many.csv", "many.csv.gz"}) {
    write_trace(tmp().path(name), t, trace_format::torch);
    EXPECT_THAT(read_trace(tmp().path(name)).events, events_are(t.events)) << name;
  }
}

TEST(trace_io, line_numbers_run_on_across_pieces) {
  // Header (line 1) and 100,000 rows (lines 2 to 100,001); the bad row is line 100,002.
  write_trace(tmp().path("many_bad.csv"), many_rows(), trace_format::torch);
  spit(tmp().path("many_bad.csv"), slurp(tmp().path("many_bad.csv")) + "100000,alloc,1,1\n");
  EXPECT_THAT(read_error(tmp().path("many_bad.csv")),
              HasSubstr(tmp().path("many_bad.csv") + ":100002: wrong number of fields: 4 instead of 5"));
}

TEST(trace_io, a_long_line_under_the_cap_is_read_whole_and_judged) {
  // A row whose addr has 100,000 digits: read whole (it crosses no limit), then refused for its number.
  trace t;
  t.events = {ev(1, trace_action::alloc, 64, 8)};
  write_trace(tmp().path("long_line.csv"), t, trace_format::torch);
  const std::string text = slurp(tmp().path("long_line.csv")) + "2,alloc," + std::string(100000, '7') + ",8,0\n";
  spit(tmp().path("long_line.csv"), text);
  EXPECT_THAT(read_error(tmp().path("long_line.csv")), HasSubstr("long_line.csv:3: addr '777"));
  EXPECT_THAT(read_error(tmp().path("long_line.csv")), HasSubstr("overflows 64 bits"));
}

// ---------------------------------------------------------------------------------------------------------
// Hostile input: memory stays bounded by the events held, whatever the input claims or holds

TEST(trace_io, a_line_past_1_mib_is_refused_in_a_file_and_in_gzip) {
  // 2 MiB of digits on one line: before, the buffer doubled to hold it; a line of 2 GiB took 2.4 GB.
  trace t;
  t.events = {ev(1, trace_action::alloc, 64, 8)};
  write_trace(tmp().path("endless.csv"), t, trace_format::torch);
  const std::string text = slurp(tmp().path("endless.csv")) + "2,alloc," + std::string(2 << 20, '7') + ",8,0\n";
  spit(tmp().path("endless.csv"), text);
  const std::string cap = "a line longer than 1048576 bytes: not a trace";
  EXPECT_THAT(read_error(tmp().path("endless.csv")), HasSubstr("endless.csv:3: " + cap));
  gzFile gz = gzopen(tmp().path("endless.csv.gz").c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  gzclose(gz);
  EXPECT_THAT(read_error(tmp().path("endless.csv.gz")), HasSubstr("endless.csv.gz:3: " + cap));
}

TEST(trace_io, dev_zero_is_refused_after_a_mebibyte) {
  // A character device of endless NUL bytes: no size, no line break. Before, it grew without bound.
  if (!std::filesystem::exists("/dev/zero")) GTEST_SKIP() << "no /dev/zero";
  EXPECT_THAT(read_error("/dev/zero"), HasSubstr("/dev/zero:1: a line longer than 1048576 bytes: not a trace"));
}

TEST(trace_io, a_sparse_file_of_two_tebibytes_is_refused_without_a_huge_reserve) {
  // The torch header, then 2 TiB of holes (NUL bytes that take no disk): the size said 55 billion rows.
  const std::string path = tmp().path("sparse.csv");
  spit(path, "time_us,action,addr,size,stream\n");
  if (::truncate(path.c_str(), static_cast<off_t>(2) << 40) != 0) GTEST_SKIP() << "no sparse files here";
  EXPECT_THAT(read_error(path), HasSubstr("sparse.csv:2: a line longer than 1048576 bytes: not a trace"));
  std::filesystem::remove(path);
}

std::string gzip_bytes(const std::string& raw) {
  uLongf len = compressBound(static_cast<uLong>(raw.size())) + 64;
  std::string out(len, '\0');
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

TEST(trace_io, a_gzip_vram_file_is_refused_at_its_header_before_it_is_inflated) {
  // A valid header for 1 event in 2 payload bytes, then 64 MiB of zeros: before, the whole 64 MiB was
  // inflated and then refused; now one byte past the 2 announced is enough, and the refusal names the 2.
  trace t;
  t.events = {ev(1, trace_action::alloc, 0, 0)};
  write_trace(tmp().path("one.vram"), t, trace_format::vram);
  std::string raw = slurp(tmp().path("one.vram"));
  ASSERT_EQ(raw.size(), 40u + 2u);  // tag 0x30 (alloc, same addr and size as the zero event), time 1
  spit(tmp().path("bomb.vram.gz"), gzip_bytes(raw + std::string(64 << 20, '\0')));
  EXPECT_THAT(read_error(tmp().path("bomb.vram.gz")),
              HasSubstr("byte 42: corrupt vram trace: the data goes on past the 2-byte payload the header gives"));
  // A header that claims more payload than deflate can make of the compressed bytes is refused at once.
  std::string lying = raw;
  for (int i = 0; i < 8; ++i) lying[24 + i] = static_cast<char>(i == 5 ? 1 : 0);  // payload 2^40 bytes
  for (int i = 0; i < 8; ++i) lying[16 + i] = static_cast<char>(i == 4 ? 0x40 : 0);  // 2^38 events: they fit
  const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(lying.data()), 36);
  for (int i = 0; i < 4; ++i) lying[36 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  spit(tmp().path("liar.vram.gz"), gzip_bytes(lying));
  EXPECT_THAT(read_error(tmp().path("liar.vram.gz")),
              HasSubstr("the header's payload of 1099511627776 bytes cannot come from"));
  // The real thing still reads.
  spit(tmp().path("one.vram.gz"), gzip_bytes(raw));
  EXPECT_EQ(read_trace(tmp().path("one.vram.gz")).events.size(), 1u);
}

// A vram header for @p count events in @p payload_size bytes, sealed with its CRC (payload CRC 0).
std::string vram_header_claiming(std::uint64_t count, std::uint64_t payload_size) {
  std::string h = "\x89VRAMTR\n" + std::string(32, '\0');
  for (int i = 0; i < 8; ++i) {
    if (i < 4) h[8 + i] = static_cast<char>(i == 0 ? 1 : 0);  // version 1, flags 0
    h[16 + i] = static_cast<char>((count >> (8 * i)) & 0xff);
    h[24 + i] = static_cast<char>((payload_size >> (8 * i)) & 0xff);
  }
  const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(h.data()), 36);
  for (int i = 0; i < 4; ++i) h[36 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  return h;
}

long peak_rss_kib() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

TEST(trace_io, a_gzip_vram_header_claiming_gigabytes_costs_only_the_bytes_that_follow) {
  // 2 MB of gzip (random bytes do not compress) under a header that claims a 1.9 GB payload of 475 million
  // events: deflate could make that much of 2 MB, so only the bytes that really come may be held. Before,
  // the claimed 1.9 GB was allocated and zeroed first.
  std::mt19937 rng(7);
  std::string raw = vram_header_claiming(475'000'000, 1'900'000'000);
  for (int i = 0; i < 2'000'000; ++i) raw += static_cast<char>(rng());
  spit(tmp().path("claims.vram.gz"), gzip_bytes(raw));
  const long before = peak_rss_kib();
  EXPECT_THAT(read_error(tmp().path("claims.vram.gz")),
              HasSubstr("byte 2000040: corrupt vram trace: payload is 2000000 bytes, the header says 1900000000"));
  EXPECT_LT(peak_rss_kib() - before, 256 * 1024) << "KiB more at the peak";
}

TEST(trace_io, a_vram_header_with_more_payload_than_its_events_can_take_is_refused) {
  // A record is at most 41 bytes (a tag and four 10-byte varints): 1 event cannot take 100 bytes.
  spit(tmp().path("roomy.vram"), vram_header_claiming(1, 100) + std::string(100, '\0'));
  EXPECT_THAT(read_error(tmp().path("roomy.vram")),
              HasSubstr("byte 24: corrupt vram trace: payload of 100 bytes is more than 1 events can take"));
}

// What read_trace says of a FIFO that a thread fills with @p head and then zero bytes, up to @p limit
// bytes or until the reader closes it, and how many bytes went in: a file of no known size, as a pipe
// from another program is.
struct pipe_read {
  std::string error;
  std::size_t written = 0;
};
pipe_read read_a_pipe(const std::string& head, std::size_t limit) {
  const std::string fifo = tmp().path("pipe");
  ::unlink(fifo.c_str());
  if (::mkfifo(fifo.c_str(), 0600) != 0) return {"no fifo", 0};
  const auto old_handler = std::signal(SIGPIPE, SIG_IGN);  // the reader closes early: EPIPE, not a signal
  pipe_read r;
  std::thread writer([&] {
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;
    const std::string zeros(std::size_t{1} << 16, '\0');
    for (bool first = true; r.written < limit; first = false) {
      const std::string& chunk = first ? head : zeros;
      const ssize_t n = ::write(fd, chunk.data(), chunk.size());
      if (n <= 0) break;
      r.written += static_cast<std::size_t>(n);
    }
    ::close(fd);
  });
  r.error = read_error(fifo);
  writer.join();
  std::signal(SIGPIPE, old_handler);
  ::unlink(fifo.c_str());
  return r;
}

TEST(trace_io, a_pipe_of_gzip_is_inflated_as_it_comes_not_read_whole) {
  // A gzip header, then zeros (a corrupt stored block): refused after the first 256 KiB read. Before, the
  // whole 64 MiB was read first, and an endless pipe grew until the memory ran out.
  const pipe_read r = read_a_pipe(std::string("\x1f\x8b\x08\0\0\0\0\0\0\x03", 10), std::size_t{64} << 20);
  if (r.error == "no fifo") GTEST_SKIP() << "no FIFOs here";
  EXPECT_THAT(r.error, HasSubstr("pipe: corrupt gzip data"));
  EXPECT_LT(r.written, std::size_t{8} << 20) << "bytes the reader let in";
}

TEST(trace_io, a_pipe_of_vram_is_read_no_further_than_its_header_says) {
  // A valid header and payload of one event, then zeros: refused one byte past the 2-byte payload. Before,
  // the whole 64 MiB was read first, and an endless pipe grew until the memory ran out.
  const std::string payload("\x30\x01", 2);
  std::string head = vram_header_claiming(1, 2) + payload;
  const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(payload.data()), 2);
  for (int i = 0; i < 4; ++i) head[32 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  const uLong header_crc = crc32(0L, reinterpret_cast<const Bytef*>(head.data()), 36);
  for (int i = 0; i < 4; ++i) head[36 + i] = static_cast<char>((header_crc >> (8 * i)) & 0xff);
  const pipe_read r = read_a_pipe(head, std::size_t{64} << 20);
  if (r.error == "no fifo") GTEST_SKIP() << "no FIFOs here";
  EXPECT_THAT(r.error, HasSubstr("pipe: byte 42: corrupt vram trace: the data goes on past the 2-byte payload"));
  EXPECT_LT(r.written, std::size_t{8} << 20) << "bytes the reader let in";
}

// ---------------------------------------------------------------------------------------------------------
// Round trips

TEST(trace_io, torch_to_vram_to_torch_keeps_every_event) {
  const trace t = read_trace(data("torch_small.csv"));
  write_trace(tmp().path("small.vram"), t, trace_format::vram);
  const trace v = read_trace(tmp().path("small.vram"));
  EXPECT_EQ(v.name, "small");
  EXPECT_THAT(v.events, events_are(torch_small_events));
  write_trace(tmp().path("small_back.csv"), v, trace_format::torch);
  EXPECT_EQ(slurp(tmp().path("small_back.csv")), slurp(data("torch_small.csv")));  // byte for byte
}

TEST(trace_io, gzip_written_when_the_path_ends_in_gz) {
  const trace t = read_trace(data("torch_small.csv"));
  for (const trace_format f : {trace_format::torch, trace_format::vram}) {
    const std::string p = tmp().path(std::string("small_gz.") + std::string(to_string(f)) + ".gz");
    write_trace(p, t, f);
    const std::string bytes = slurp(p);
    ASSERT_GE(bytes.size(), 2u);
    EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x1f);
    EXPECT_EQ(static_cast<unsigned char>(bytes[1]), 0x8b);
    EXPECT_THAT(read_trace(p).events, events_are(torch_small_events));
  }
}

// A write that cannot finish (here the process may not write files past 1000 bytes, so write(2) fails with
// EFBIG) leaves the trace that was there byte for byte, with its mode, and no part of the new one beside it;
// a write that finishes replaces it, keeping the mode.
TEST(trace_io, a_write_that_fails_leaves_the_file_that_was_there) {
  const std::string p = tmp().path("kept.csv");
  const trace small = read_trace(data("torch_small.csv"));
  write_trace(p, small, trace_format::torch);
  ASSERT_EQ(::chmod(p.c_str(), 0640), 0);
  const std::string before = slurp(p);
  ASSERT_LT(before.size(), 1000u);
  trace big;
  for (int i = 0; i < 200; ++i) big.events.push_back(ev(i, trace_action::alloc, 4096u * (i + 1), 512));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{1000, 1000};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      write_trace(p, big, trace_format::torch);
    } catch (const error& e) {
      ::_exit(std::string(e.what()).find("kept.csv: cannot write") != std::string::npos ? 0 : 2);
    }
    ::_exit(1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the write did not fail; 2: the message names no file or reason";
  EXPECT_EQ(slurp(p), before);
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(p).parent_path()))
    EXPECT_THAT(entry.path().filename().string(), ::testing::Not(::testing::StartsWith("kept.csv."))) << "left behind";
  write_trace(p, big, trace_format::torch);
  EXPECT_EQ(read_trace(p).events.size(), 200u);
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  // A link is written through, and stays a link; a file with a second name is written in place, so both
  // names still show the same file.
  const std::string link = tmp().path("link.csv"), second = tmp().path("second.csv");
  std::filesystem::remove(link);
  std::filesystem::remove(second);
  std::filesystem::create_symlink(p, link);
  write_trace(link, small, trace_format::torch);
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(slurp(p), before);
  std::filesystem::create_hard_link(p, second);
  write_trace(p, big, trace_format::torch);
  EXPECT_EQ(slurp(second), slurp(p));
  EXPECT_EQ(std::filesystem::hard_link_count(p), 2u);
  std::filesystem::remove(second);
}

// A link to a file not yet made: the file is made where the link points, so that folder is what must take
// it. A link into a folder that does not exist is refused before any work, naming where it points.
TEST(trace_io, a_link_is_checked_where_it_points) {
  const std::string into_nothing = tmp().path("into-nothing.vram");
  const std::string fine = tmp().path("fine.vram");
  std::filesystem::remove(into_nothing);
  std::filesystem::remove(fine);
  std::filesystem::create_symlink("no-such-folder/x.vram", into_nothing);
  std::filesystem::create_symlink("made-later.vram", fine);
  try {
    detail::check_writable(into_nothing);
    FAIL() << "a link into a missing folder was taken";
  } catch (const error& e) {
    const std::string where = tmp().path("no-such-folder");
    EXPECT_EQ(std::string(e.what()), into_nothing + ": cannot create: it links to " + where + "/x.vram, and " + where +
                                         " is not a folder this user may write to");
  }
  EXPECT_NO_THROW(detail::check_writable(fine));
  trace t;
  t.events = {ev(1, trace_action::alloc, 0x1000, 512)};
  write_trace(fine, t, trace_format::vram);  // through the link, to the file it names
  EXPECT_TRUE(std::filesystem::is_symlink(fine));
  EXPECT_EQ(read_trace(tmp().path("made-later.vram")).events.size(), 1u);
  std::filesystem::remove(into_nothing);
  std::filesystem::remove(fine);
  std::filesystem::remove(tmp().path("made-later.vram"));
}

// A file the user may not write is refused and kept, as a shell's redirection refuses it (root may write
// any file, so there is nothing to see as root).
TEST(trace_io, a_file_the_user_may_not_write_is_refused_and_kept) {
  if (::geteuid() == 0) GTEST_SKIP() << "root may write a read-only file";
  const std::string p = tmp().path("read_only.csv");
  std::filesystem::remove(p);
  const trace small = read_trace(data("torch_small.csv"));
  write_trace(p, small, trace_format::torch);
  ASSERT_EQ(::chmod(p.c_str(), 0444), 0);
  const std::string before = slurp(p);
  trace other = small;
  other.events.pop_back();
  try {
    write_trace(p, other, trace_format::torch);
    ADD_FAILURE() << "a read-only file was written";
  } catch (const error& e) {
    EXPECT_THAT(e.what(), HasSubstr("read_only.csv: cannot create: Permission denied"));
  }
  EXPECT_EQ(slurp(p), before);
}

TEST(trace_io, rmm_to_vram_keeps_every_event) {
  const trace r = read_trace(data("rmm_small.csv"));
  write_trace(tmp().path("rmm.vram"), r, trace_format::vram);
  EXPECT_THAT(read_trace(tmp().path("rmm.vram")).events, events_are(r.events));
  write_trace(tmp().path("rmm_back.csv"), r, trace_format::rmm);
  EXPECT_THAT(read_trace(tmp().path("rmm_back.csv")).events, events_are(r.events));
}

TEST(trace_io, rmm_writer_keeps_only_what_rmm_logs) {
  // Of the ten torch rows, RMM logs alloc (2), free_requested (1) and oom (1); its clock is the time of
  // day, so 1001 us after the epoch is 00:00:00.001001.
  write_trace(tmp().path("small.rmm.csv"), read_trace(data("torch_small.csv")), trace_format::rmm);
  EXPECT_EQ(slurp(tmp().path("small.rmm.csv")),
            "Thread,Time,Action,Pointer,Size,Stream\n"
            "1,00:00:00.001001,allocate,0x3e8000,1024,0x0\n"
            "1,00:00:00.001005,allocate,0x3e8400,512,0x7\n"
            "1,00:00:00.001010,free,0x3e8000,1024,0x0\n"
            "1,00:00:00.001030,allocate failure,0x0,4294967296,0x0\n");
}

TEST(trace_io, rmm_rows_retimed_counts_the_times_that_do_not_come_back) {
  // RMM's Time is a time of day. Times from the first midnight come back: rmm_small reads as 86,399,999,000
  // .. 86,400,000,250 us and is written and read back the same. PyTorch's clock is from the epoch:
  // 1,796,219,307,817,423 us is day 20,789 + 49,707,817,423 us, and reads back as that remainder. A step of
  // 13 h (under a day, over 12 h) after 1 h comes back; a step of 25 h from 1 h + 13 h = 14 h lands at
  // 15 h of the day, which is after 14 h, so no day is added and it reads back 24 h early.
  EXPECT_EQ(rows_retimed(read_trace(data("rmm_small.csv")), trace_format::rmm), 0u);
  trace t;
  t.events = {ev(1'796'219'307'817'423, trace_action::alloc, 64, 8),
              ev(1'796'219'307'817'424, trace_action::free_requested, 64, 8),
              ev(1'796'219'307'817'425, trace_action::free_completed, 64, 8)};  // not written: not counted
  EXPECT_EQ(rows_retimed(t, trace_format::rmm), 2u);
  EXPECT_EQ(rows_retimed(t, trace_format::torch), 0u);
  EXPECT_EQ(rows_retimed(t, trace_format::vram), 0u);
  write_trace(tmp().path("epoch.rmm.csv"), t, trace_format::rmm);
  EXPECT_THAT(read_trace(tmp().path("epoch.rmm.csv")).events,
              events_are(std::vector{ev(49'707'817'423, trace_action::alloc, 64, 8),
                                     ev(49'707'817'424, trace_action::free_requested, 64, 8)}));
  constexpr std::int64_t hour = 3'600'000'000;
  trace gaps;
  gaps.events = {ev(1 * hour, trace_action::alloc, 64, 8), ev(14 * hour, trace_action::alloc, 128, 8),
                 ev(39 * hour, trace_action::alloc, 192, 8)};
  EXPECT_EQ(rows_retimed(gaps, trace_format::rmm), 1u);
  write_trace(tmp().path("gaps.rmm.csv"), gaps, trace_format::rmm);
  EXPECT_THAT(read_trace(tmp().path("gaps.rmm.csv")).events,
              events_are(std::vector{ev(1 * hour, trace_action::alloc, 64, 8),
                                     ev(14 * hour, trace_action::alloc, 128, 8),
                                     ev(15 * hour, trace_action::alloc, 192, 8)}));
}

TEST(trace_io, a_device_index_of_a_file_with_one_trace_is_said_to_be_unused) {
  const std::string p = tmp().path("one.csv");
  spit(p, "time_us,action,addr,size,stream\n5,alloc,64,8,0\n");
  read_options o;
  o.device_index = 2;
  const std::vector<trace> ts = read_traces(p, o);
  ASSERT_EQ(ts.size(), 1u);
  EXPECT_THAT(ts[0].events, events_are(std::vector{ev(5, trace_action::alloc, 64, 8)}));
  EXPECT_EQ(ts[0].notes, (std::vector<std::string>{"--device-index 2 left unused: only a PyTorch snapshot holds the "
                                                   "traces of several devices, and this file is one trace, read whole"}));
  EXPECT_TRUE(read_traces(p).front().notes.empty());
}

TEST(trace_io, a_gz_name_in_any_case_is_written_gzip) {
  // format_for_name takes ".CSV.GZ" for torch's CSV; the file must then be gzip too, not plain text under a
  // .GZ name that zcat refuses.
  trace t;
  t.events = {ev(5, trace_action::alloc, 64, 8)};
  for (const std::string name : {"upper.CSV.GZ", "mixed.vram.Gz"}) {
    const std::string p = tmp().path(name);
    write_trace(p, t, format_for_name(p));
    const std::string bytes = slurp(p);
    ASSERT_GE(bytes.size(), 2u);
    EXPECT_EQ(bytes.substr(0, 2), "\x1f\x8b") << name;
    EXPECT_THAT(read_trace(p).events, events_are(t.events));
  }
}

TEST(trace_io, vram_format_is_compact_for_repeated_fields) {
  // free_requested then free_completed of the same block: the second record is a tag byte and a one-byte
  // time delta. Header 40 bytes; records: alloc 1+1+2(zigzag addr 64 -> 128)+1+0 = 5, free_requested
  // 1+1+0+0 = 2, free_completed 1+1 = 2. Total 49.
  trace t;
  t.events = {ev(1, trace_action::alloc, 64, 8), ev(2, trace_action::free_requested, 64, 8),
              ev(3, trace_action::free_completed, 64, 8)};
  write_trace(tmp().path("tiny.vram"), t, trace_format::vram);
  EXPECT_EQ(slurp(tmp().path("tiny.vram")).size(), 49u);
  EXPECT_THAT(read_trace(tmp().path("tiny.vram")).events, events_are(t.events));
}

TEST(trace_io, writer_refuses_times_that_go_backwards_or_below_zero) {
  trace t;
  t.events = {ev(5, trace_action::alloc, 64, 8), ev(4, trace_action::free_requested, 64, 8)};
  EXPECT_THROW(write_trace(tmp().path("back.vram"), t, trace_format::vram), usage_error);
  t.events = {ev(-1, trace_action::alloc, 64, 8)};
  EXPECT_THROW(write_trace(tmp().path("neg.csv"), t, trace_format::torch), usage_error);
}

TEST(trace_io, extreme_values_round_trip_through_every_format) {
  trace t;
  const std::uint64_t max = UINT64_MAX;
  t.events = {ev(0, trace_action::alloc, max, max, max), ev(0, trace_action::free_requested, 0, 0, 0),
              ev(INT64_MAX, trace_action::alloc, 1, 1, 1)};
  write_trace(tmp().path("extreme.vram"), t, trace_format::vram);
  EXPECT_THAT(read_trace(tmp().path("extreme.vram")).events, events_are(t.events));
  write_trace(tmp().path("extreme.csv"), t, trace_format::torch);
  EXPECT_THAT(read_trace(tmp().path("extreme.csv")).events, events_are(t.events));
}

// ---------------------------------------------------------------------------------------------------------
// Bad input: each names the file, the line and the problem

struct bad_case {
  const char* file;
  const char* where;    // ":LINE:" (or ":" for whole-file problems)
  const char* problem;  // words of the message
};

class bad_input : public ::testing::TestWithParam<bad_case> {};

TEST_P(bad_input, gives_input_error_naming_file_line_and_problem) {
  const bad_case c = GetParam();
  const std::string msg = read_error(data(c.file));
  ASSERT_FALSE(msg.empty()) << c.file << " was read without error";
  EXPECT_THAT(msg, HasSubstr(data(c.file) + c.where)) << msg;
  EXPECT_THAT(msg, HasSubstr(c.problem)) << msg;
}

INSTANTIATE_TEST_SUITE_P(
    files, bad_input,
    ::testing::Values(bad_case{"missing_file.csv", ":", "cannot open"}, bad_case{"empty.csv", ":1:", "empty file"},
                      bad_case{"bad_header_name.csv", ":1:", "header column 3 is 'adr', expected 'addr'"},
                      bad_case{"bad_header_missing.csv", ":1:", "header has 4 columns, expected 5"},
                      bad_case{"bad_fields.csv", ":3:", "wrong number of fields: 4 instead of 5"},
                      bad_case{"bad_action.csv", ":4:", "unknown action 'malloc'"},
                      bad_case{"bad_negative.csv", ":2:", "negative size '-5'"},
                      bad_case{"bad_not_number.csv", ":2:", "addr '0x10' is not a number"},
                      bad_case{"bad_overflow.csv", ":2:", "addr '18446744073709551616' overflows 64 bits"},
                      bad_case{"bad_backwards.csv", ":3:", "time_us 4 goes backwards"},
                      bad_case{"bad_rmm_pointer.csv", ":2:", "Pointer '0xzz' is not a hexadecimal number"},
                      bad_case{"bad_rmm_time.csv", ":2:", "Time 'noon' is not HH:MM:SS.ffffff"},
                      bad_case{"truncated.csv.gz", ":", "truncated gzip stream"}),
    [](const ::testing::TestParamInfo<bad_case>& info) {
      std::string name = info.param.file;
      for (char& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

TEST(trace_io, unknown_format_names_the_first_line) {
  const std::string p = tmp().path("notes.txt");
  spit(p, "hello,world\n1,2\n");
  EXPECT_THAT(read_error(p), HasSubstr(p + ":1: unknown trace format: the first line 'hello,world'"));
}

TEST(trace_io, a_directory_is_not_a_trace) {
  EXPECT_THAT(read_error(data_dir), HasSubstr("is a directory"));
}

TEST(trace_io, every_truncation_of_a_gzip_trace_is_an_input_error) {
  const std::string gz = slurp(data("torch_small.csv.gz"));
  for (std::size_t n = 1; n < gz.size(); ++n) {
    const std::string p = tmp().path("cut.csv.gz");
    spit(p, gz.substr(0, n));
    EXPECT_FALSE(read_error(p).empty()) << "prefix of " << n << " bytes";
  }
}

TEST(trace_io, corrupt_gzip_data_is_an_input_error) {
  std::string gz = slurp(data("torch_small.csv.gz"));
  gz[gz.size() / 2] = static_cast<char>(gz[gz.size() / 2] ^ 0x55);
  const std::string p = tmp().path("corrupt.csv.gz");
  spit(p, gz);
  EXPECT_THAT(read_error(p), HasSubstr(p + ": corrupt gzip data"));
}

TEST(trace_io, garbage_after_the_gzip_stream_is_an_input_error) {
  const std::string p = tmp().path("garbage.csv.gz");
  spit(p, slurp(data("torch_small.csv.gz")) + "junk");
  EXPECT_THAT(read_error(p), HasSubstr("4 bytes of garbage after the compressed stream"));
}

TEST(trace_io, concatenated_gzip_members_read_as_one_text) {
  // gzip(header + first 5 rows) + gzip(last 5 rows), as `cat a.gz b.gz` makes.
  const trace t = read_trace(data("torch_small.csv"));
  trace first, second;
  first.events.assign(t.events.begin(), t.events.begin() + 5);
  second.events.assign(t.events.begin() + 5, t.events.end());
  write_trace(tmp().path("a.csv.gz"), first, trace_format::torch);
  write_trace(tmp().path("b.csv"), second, trace_format::torch);
  std::string b = slurp(tmp().path("b.csv"));
  b = b.substr(b.find('\n') + 1);  // the rows without their header, compressed as a second member
  z_stream zs{};
  ASSERT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string member(deflateBound(&zs, b.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(b.data());
  zs.avail_in = static_cast<uInt>(b.size());
  zs.next_out = reinterpret_cast<Bytef*>(member.data());
  zs.avail_out = static_cast<uInt>(member.size());
  ASSERT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  member.resize(zs.total_out);
  deflateEnd(&zs);
  spit(tmp().path("joined.csv.gz"), slurp(tmp().path("a.csv.gz")) + member);
  EXPECT_THAT(read_trace(tmp().path("joined.csv.gz")).events, events_are(torch_small_events));
}

// ---------------------------------------------------------------------------------------------------------
// The vram format's validation

std::uint32_t crc(const std::string& s, std::size_t from, std::size_t len) {
  return static_cast<std::uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(s.data() + from), static_cast<uInt>(len)));
}
void put_le(std::string& s, std::size_t at, std::uint64_t v, int width) {
  for (int i = 0; i < width; ++i) s[at + static_cast<std::size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
}
// Re-seals a patched file: payload CRC at 32, header CRC (over bytes 0..35) at 36.
void reseal(std::string& s) {
  put_le(s, 32, crc(s, 40, s.size() - 40), 4);
  put_le(s, 36, crc(s, 0, 36), 4);
}

std::string small_vram() {
  write_trace(tmp().path("base.vram"), read_trace(data("torch_small.csv")), trace_format::vram);
  return slurp(tmp().path("base.vram"));
}

TEST(trace_io, every_truncation_of_a_vram_file_is_an_input_error) {
  const std::string v = small_vram();
  for (std::size_t n = 1; n < v.size(); ++n) {
    const std::string p = tmp().path("cut.vram");
    spit(p, v.substr(0, n));
    EXPECT_FALSE(read_error(p).empty()) << "prefix of " << n << " bytes";
  }
}

TEST(trace_io, every_flipped_byte_of_a_vram_file_is_an_input_error) {
  const std::string v = small_vram();
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::string bad = v;
    bad[i] = static_cast<char>(bad[i] ^ 0xff);
    const std::string p = tmp().path("flip.vram");
    spit(p, bad);
    EXPECT_FALSE(read_error(p).empty()) << "byte " << i;
  }
}

TEST(trace_io, vram_event_count_that_cannot_fit_is_refused_before_any_allocation) {
  std::string v = small_vram();
  put_le(v, 16, std::uint64_t{1} << 60, 8);
  reseal(v);
  spit(tmp().path("count.vram"), v);
  EXPECT_THAT(read_error(tmp().path("count.vram")), HasSubstr("byte 16: corrupt vram trace: event count"));
}

TEST(trace_io, vram_count_smaller_than_the_records_is_refused) {
  std::string v = small_vram();
  put_le(v, 16, 9, 8);  // ten records are there
  reseal(v);
  spit(tmp().path("short.vram"), v);
  EXPECT_THAT(read_error(tmp().path("short.vram")), HasSubstr("bytes after the last of 9 events"));
}

TEST(trace_io, vram_bad_tag_and_bad_version_are_refused_even_when_sealed) {
  std::string v = small_vram();
  v[40] = static_cast<char>(0x0f);  // action 15 does not exist
  reseal(v);
  spit(tmp().path("tag.vram"), v);
  EXPECT_THAT(read_error(tmp().path("tag.vram")), HasSubstr("byte 40: corrupt vram trace: event 0: bad tag byte 0x0f"));

  std::string w = small_vram();
  put_le(w, 8, 2, 4);
  reseal(w);
  spit(tmp().path("v2.vram"), w);
  EXPECT_THAT(read_error(tmp().path("v2.vram")), HasSubstr("version 2 (this build reads version 1)"));
}

TEST(trace_io, vram_varint_running_off_the_end_is_refused) {
  // One event whose time varint never ends: tag 0x00 then 0xff bytes to the end of the payload.
  std::string v = small_vram().substr(0, 40) + std::string("\x00\xff\xff\xff", 4);
  put_le(v, 16, 1, 8);
  put_le(v, 24, 4, 8);
  reseal(v);
  spit(tmp().path("varint.vram"), v);
  EXPECT_THAT(read_error(tmp().path("varint.vram")), HasSubstr("truncated varint"));
}

TEST(trace_io, random_damage_gives_a_trace_or_an_input_error_never_anything_else) {
  // Seeded: 300 damaged copies of each kind of file (bytes changed, dropped, inserted, or the file cut).
  const std::vector<std::string> bases = {slurp(data("torch_small.csv")), slurp(data("torch_small.csv.gz")),
                                          slurp(data("rmm_small.csv")), small_vram()};
  std::mt19937 rng(12345);
  const std::string p = tmp().path("damaged.bin");
  int refused = 0;
  for (const std::string& base : bases) {
    for (int round = 0; round < 300; ++round) {
      std::string d = base;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < edits && !d.empty(); ++k) {
        const std::size_t at = rng() % d.size();
        switch (rng() % 4) {
          case 0: d[at] = static_cast<char>(rng()); break;
          case 1: d.erase(at, 1 + rng() % 8); break;
          case 2: d.insert(at, 1 + rng() % 8, static_cast<char>(rng())); break;
          default: d.resize(at); break;
        }
      }
      spit(p, d);
      try {
        read_trace(p);
      } catch (const input_error&) {
        ++refused;
      }  // any other exception fails the test
    }
  }
  EXPECT_GT(refused, 0);
}

// ---------------------------------------------------------------------------------------------------------
// check_trace

TEST(trace_check, counts_unmatched_and_double_frees_and_duplicate_allocs) {
  trace t;
  t.events = {
      ev(0, trace_action::alloc, 100, 8),           // 0: A live
      ev(1, trace_action::free_requested, 100, 8),  // 1: A freed
      ev(2, trace_action::free_completed, 100, 8),  // 2: the allocator's row, not checked
      ev(3, trace_action::free_requested, 100, 8),  // 3: double free of A
      ev(4, trace_action::free_requested, 200, 8),  // 4: B never allocated: unmatched
      ev(5, trace_action::free_requested, 200, 8),  // 5: unmatched again (not a double free)
      ev(6, trace_action::alloc, 300, 8),           // 6: C live
      ev(7, trace_action::alloc, 300, 8),           // 7: C allocated while live: duplicate
      ev(8, trace_action::alloc, 100, 8),           // 8: A reused after its free: fine
  };
  const trace_check c = check_trace(t);
  EXPECT_EQ(c.unmatched_frees, 2u);
  EXPECT_EQ(c.first_unmatched_free, 4u);
  EXPECT_EQ(c.double_frees, 1u);
  EXPECT_EQ(c.first_double_free, 3u);
  EXPECT_EQ(c.duplicate_allocs, 1u);
  EXPECT_EQ(c.first_duplicate_alloc, 7u);
  EXPECT_EQ(c.live_at_end, 2u);  // C and A
  EXPECT_FALSE(c.clean());
}

TEST(trace_check, a_clean_trace_is_clean) {
  const trace_check c = check_trace(read_trace(data("torch_small.csv")));
  EXPECT_TRUE(c.clean());
  EXPECT_EQ(c.live_at_end, 1u);  // the block at 4097024 is never freed
  EXPECT_FALSE(c.first_unmatched_free.has_value());
}

TEST(trace_check, many_addresses_grow_the_table) {
  // 10,000 live blocks then each freed twice: 10,000 double frees, the first at index 20,000.
  trace t;
  for (std::uint64_t i = 0; i < 10'000; ++i) t.events.push_back(ev(0, trace_action::alloc, i * 512, 512));
  for (int round = 0; round < 2; ++round)
    for (std::uint64_t i = 0; i < 10'000; ++i) t.events.push_back(ev(0, trace_action::free_requested, i * 512, 512));
  const trace_check c = check_trace(t);
  EXPECT_EQ(c.double_frees, 10'000u);
  EXPECT_EQ(c.first_double_free, 20'000u);
  EXPECT_EQ(c.unmatched_frees, 0u);
  EXPECT_EQ(c.live_at_end, 0u);
}

// ---------------------------------------------------------------------------------------------------------
// The shared recorded traces (shared/traces/README.md)

class shared_trace : public ::testing::TestWithParam<std::pair<const char*, std::size_t>> {};

TEST_P(shared_trace, parses_with_the_event_count_of_the_readme_and_round_trips) {
  const auto [file, count] = GetParam();
  const std::string path = shared_dir + "/" + file;
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  const trace t = read_trace(path);
  EXPECT_EQ(t.events.size(), count);
  const trace_check c = check_trace(t);
  EXPECT_TRUE(c.clean()) << "unmatched " << c.unmatched_frees << " double " << c.double_frees << " dup "
                         << c.duplicate_allocs;
  const std::string v = tmp().path(std::string(file) + ".vram");
  write_trace(v, t, trace_format::vram);
  EXPECT_THAT(read_trace(v).events, events_are(t.events));
}

INSTANTIATE_TEST_SUITE_P(readme, shared_trace,
                         ::testing::Values(std::pair{"vit_train.csv.gz", std::size_t{58'758}},
                                           std::pair{"moe_train.csv.gz", std::size_t{77'575}},
                                           std::pair{"gpt2_generate.csv.gz", std::size_t{827'037}}),
                         [](const auto& info) {
                           std::string name = info.param.first;
                           return name.substr(0, name.find('.'));
                         });

}  // namespace
}  // namespace vram
