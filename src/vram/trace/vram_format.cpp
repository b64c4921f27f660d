// vram's binary trace format, version 1. Design decisions (the layout is in docs/trace-format.md):
//  - one record per event, read in a single forward pass: a tag byte (action in bits 0-3, flags above),
//    then varints. Time is a delta from the event before (traces are monotone); addr is a zigzag delta from
//    the event before, or left out when equal (a free_completed after its free_requested); size is left out
//    when equal to the event before's; stream is written only when it changes. The recorded traces take
//    about 6 bytes an event;
//  - everything read is checked: the header's own CRC-32, the payload size against the file size, the
//    event count against the smallest and the largest possible record (2 and 41 bytes) before anything is
//    reserved, every varint against the end of the payload and 64 bits, every tag against the known
//    actions and flags, times against overflow, and the payload's CRC-32. A bad file is an input_error,
//    never a crash or a huge allocation;
//  - a stream (a file, a gzip) is read header first: once the header is checked, the payload is read into a
//    buffer that grows as bytes really arrive, up to the header's payload size + 1 byte, so a .vram.gz
//    that inflates to gigabytes is refused after the payload its header gives, and a header that claims
//    gigabytes costs only the bytes that follow it;
//  - integers in the header are little-endian regardless of the host.

#include "vram/trace/vram_format.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>

#include "vram/core/error.hpp"
#include "vram/trace/gzip.hpp"

namespace vram::detail {

namespace {

constexpr std::uint8_t action_mask = 0x0f;
constexpr std::uint8_t flag_same_addr = 0x10;
constexpr std::uint8_t flag_same_size = 0x20;
constexpr std::uint8_t flag_stream = 0x40;
constexpr std::uint8_t known_flags = action_mask | flag_same_addr | flag_same_size | flag_stream;
constexpr std::uint8_t max_action = static_cast<std::uint8_t>(trace_action::snapshot);
constexpr std::size_t min_record_size = 2;   // tag + time delta
constexpr std::size_t max_record_size = 41;  // tag + four varints of 10 bytes
constexpr std::size_t first_payload_buffer = std::size_t{1} << 20;

std::uint32_t crc32_of(std::string_view bytes) noexcept { return crc32_extend(0, bytes); }

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}
std::uint64_t get_le(std::string_view bytes, std::size_t at, int width) noexcept {
  std::uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(i)]);
  return v;
}

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

std::uint64_t zigzag(std::uint64_t delta) noexcept {  // delta taken mod 2^64, read as signed
  const auto s = static_cast<std::int64_t>(delta);
  return (delta << 1) ^ static_cast<std::uint64_t>(s >> 63);
}
std::uint64_t unzigzag(std::uint64_t z) noexcept { return (z >> 1) ^ (~(z & 1) + 1); }

// Reads the payload with bounds checks; the first failure throws with the byte offset in the file.
class payload_reader {
 public:
  payload_reader(std::string_view payload, const std::string& path) noexcept
      : begin_(reinterpret_cast<const unsigned char*>(payload.data())),
        p_(begin_),
        end_(begin_ + payload.size()),
        path_(path) {}

  bool at_end() const noexcept { return p_ == end_; }
  std::size_t offset() const noexcept { return vram_header_size + static_cast<std::size_t>(p_ - begin_); }

  std::uint8_t byte() {
    if (p_ == end_) fail("truncated record");
    return *p_++;
  }

  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) fail("truncated varint");
      const std::uint8_t b = *p_++;
      if (shift == 63 && b > 1) fail("varint overflows 64 bits");
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    fail("varint longer than 10 bytes");
  }

  [[noreturn]] void fail(std::string_view problem) const {
    throw input_error(fmt::format("{}: byte {}: corrupt vram trace: {}", path_, offset(), problem));
  }

 private:
  const unsigned char* begin_;
  const unsigned char* p_;
  const unsigned char* end_;
  const std::string& path_;
};

}  // namespace

bool is_vram_format(std::string_view bytes) noexcept { return bytes.substr(0, vram_magic.size()) == vram_magic; }

namespace {

[[noreturn]] void fail_at(const std::string& path, std::uint64_t at, std::string_view problem) {
  throw input_error(fmt::format("{}: byte {}: corrupt vram trace: {}", path, at, problem));
}

}  // namespace

vram_header_fields check_vram_header(std::string_view bytes, const std::string& path) {
  if (!is_vram_format(bytes)) fail_at(path, 0, "bad magic");
  if (bytes.size() < vram_header_size)
    fail_at(path, bytes.size(), fmt::format("truncated header ({} of {} bytes)", bytes.size(), vram_header_size));
  if (crc32_of(bytes.substr(0, 36)) != get_le(bytes, 36, 4)) fail_at(path, 36, "header checksum mismatch");
  const auto version = static_cast<std::uint32_t>(get_le(bytes, 8, 4));
  if (version != vram_format_version)
    fail_at(path, 8, fmt::format("version {} (this build reads version {})", version, vram_format_version));
  if (get_le(bytes, 12, 4) != 0) fail_at(path, 12, "unknown flags");
  vram_header_fields h;
  h.count = get_le(bytes, 16, 8);
  h.payload_size = get_le(bytes, 24, 8);
  h.payload_crc = static_cast<std::uint32_t>(get_le(bytes, 32, 4));
  if (h.count > h.payload_size / min_record_size)
    fail_at(path, 16, fmt::format("event count {} cannot fit in {} payload bytes", h.count, h.payload_size));
  const std::uint64_t fewest = h.payload_size / max_record_size + (h.payload_size % max_record_size != 0 ? 1 : 0);
  if (h.count < fewest)
    fail_at(path, 24,
            fmt::format("payload of {} bytes is more than {} events can take (at most {} bytes each)", h.payload_size,
                        h.count, max_record_size));
  return h;
}

namespace {

// pre: @p payload is exactly h.payload_size bytes.
std::vector<trace_event> decode_payload(std::string_view payload, const vram_header_fields& h,
                                        const std::string& path) {
  if (crc32_of(payload) != h.payload_crc) fail_at(path, 32, "payload checksum mismatch");
  std::vector<trace_event> events;
  events.reserve(h.count);  // count <= payload / 2, and the payload is in memory
  payload_reader in(payload, path);
  trace_event e;
  for (std::uint64_t i = 0; i < h.count; ++i) {
    const std::size_t record_at = in.offset();
    const std::uint8_t tag = in.byte();
    if ((tag & ~known_flags) != 0 || (tag & action_mask) > max_action)
      fail_at(path, record_at, fmt::format("event {}: bad tag byte 0x{:02x}", i, tag));
    e.action = static_cast<trace_action>(tag & action_mask);
    const std::uint64_t dt = in.varint();
    if (dt > static_cast<std::uint64_t>(INT64_MAX - e.time_us)) in.fail(fmt::format("event {}: time overflows", i));
    e.time_us += static_cast<std::int64_t>(dt);
    if ((tag & flag_same_addr) == 0) e.addr += unzigzag(in.varint());
    if ((tag & flag_same_size) == 0) e.size = in.varint();
    if ((tag & flag_stream) != 0) e.stream = in.varint();
    events.push_back(e);
  }
  if (!in.at_end())
    in.fail(
        fmt::format("{} bytes after the last of {} events", payload.size() + vram_header_size - in.offset(), h.count));
  return events;
}

std::string truncated_payload(std::uint64_t have, std::uint64_t says) {
  return fmt::format("payload is {} bytes, the header says {} (truncated?)", have, says);
}

}  // namespace

std::vector<trace_event> parse_vram_format(std::string_view bytes, const std::string& path) {
  const vram_header_fields h = check_vram_header(bytes, path);
  if (h.payload_size != bytes.size() - vram_header_size)
    fail_at(path, bytes.size(), truncated_payload(bytes.size() - vram_header_size, h.payload_size));
  return decode_payload(bytes.substr(vram_header_size), h, path);
}

std::vector<trace_event> read_vram_format(std::string start, const byte_reader& read, std::uint64_t exact_size,
                                          std::uint64_t compressed_size, const std::string& path, std::string* note) {
  std::string header = std::move(start);
  if (header.size() < vram_header_size) {
    const std::size_t have = header.size();
    header.resize(vram_header_size);
    header.resize(have + read(header.data() + have, vram_header_size - have));
  }
  const vram_header_fields h = check_vram_header(header, path);
  const std::uint64_t payload_size = h.payload_size;
  // A plain file longer than its header says: a recording cut off between its two writes (events appended,
  // header not yet rewritten), read as far as the header vouches for it. Anything shorter is truncated.
  std::uint64_t left_out = 0;
  if (exact_size != 0 && payload_size > exact_size - vram_header_size)
    fail_at(path, exact_size, truncated_payload(exact_size - vram_header_size, payload_size));
  if (exact_size != 0) left_out = exact_size - vram_header_size - payload_size;
  if (compressed_size != 0 && compressed_size <= UINT64_MAX / max_deflate_ratio &&
      payload_size > compressed_size * max_deflate_ratio)
    fail_at(path, 24,
            fmt::format("the header's payload of {} bytes cannot come from {} compressed bytes", payload_size,
                        compressed_size));

  // The payload and what follows it, up to one byte more than the header says: the buffer grows as the
  // bytes arrive, so a header that lies costs only what the stream really holds.
  std::string payload = header.substr(vram_header_size);
  const std::uint64_t want = std::min<std::uint64_t>(payload_size, SIZE_MAX - 1) + (left_out > 0 ? 0 : 1);
  std::size_t got = payload.size();
  while (got < want) {
    if (got == payload.size())
      payload.resize(static_cast<std::size_t>(std::min<std::uint64_t>(want, std::max(2 * got, first_payload_buffer))));
    const std::size_t asked = payload.size() - got;
    const std::size_t n = read(payload.data() + got, asked);
    got += n;
    if (n < asked) break;
  }
  if (got > payload_size)
    fail_at(path, vram_header_size + payload_size,
            fmt::format("the data goes on past the {}-byte payload the header gives", payload_size));
  if (got < payload_size) fail_at(path, vram_header_size + got, truncated_payload(got, payload_size));
  payload.resize(got);
  std::vector<trace_event> events = decode_payload(payload, h, path);
  if (left_out > 0 && note != nullptr)
    *note = fmt::format("the file goes on {} bytes past the {}-byte payload its header gives (a recording cut off "
                        "while it wrote): the {} events the header gives were read, the rest left out",
                        left_out, payload_size, events.size());
  return events;
}

std::uint32_t crc32_extend(std::uint32_t crc, std::string_view bytes) noexcept {
  uLong c = crc;
  const auto* p = reinterpret_cast<const Bytef*>(bytes.data());
  std::size_t left = bytes.size();
  while (left > 0) {
    const auto n = static_cast<uInt>(left < (1u << 30) ? left : (1u << 30));
    c = crc32(c, p, n);
    p += n;
    left -= n;
  }
  return static_cast<std::uint32_t>(c);
}

void vram_encoder::append(const trace_event& e, std::string& out) {
  std::uint8_t tag = static_cast<std::uint8_t>(e.action);
  if (e.addr == prev_.addr) tag |= flag_same_addr;
  if (e.size == prev_.size) tag |= flag_same_size;
  if (e.stream != prev_.stream) tag |= flag_stream;
  out += static_cast<char>(tag);
  put_varint(out, static_cast<std::uint64_t>(e.time_us - prev_.time_us));
  if ((tag & flag_same_addr) == 0) put_varint(out, zigzag(e.addr - prev_.addr));
  if ((tag & flag_same_size) == 0) put_varint(out, e.size);
  if ((tag & flag_stream) != 0) put_varint(out, e.stream);
  prev_ = e;
}

std::string vram_header(std::uint64_t count, std::uint64_t payload_size, std::uint32_t payload_crc) {
  std::string out;
  out.reserve(vram_header_size);
  out.append(vram_magic);
  put_u32(out, vram_format_version);
  put_u32(out, 0);
  put_u64(out, count);
  put_u64(out, payload_size);
  put_u32(out, payload_crc);
  put_u32(out, crc32_of(out));
  return out;
}

std::string format_vram(const trace& t) {
  std::string payload;
  payload.reserve(t.events.size() * 8);
  vram_encoder encoder;
  for (const trace_event& e : t.events) encoder.append(e, payload);
  std::string out = vram_header(t.events.size(), payload.size(), crc32_of(payload));
  out += payload;
  return out;
}

}  // namespace vram::detail
