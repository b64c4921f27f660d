// gzip through zlib. Design decisions:
//  - the inflater never inflates more than it is asked for: readers ask for what they have checked they
//    need (a line of at most 64 KiB, a vram header, a payload of the size that header gives), so the
//    memory a gzip bomb costs is bounded by the reader, not by the bomb;
//  - a file is read 256 KiB at a time (a smaller one in one read of its size) behind the unread input, so
//    a gzip on a pipe is never held whole;
//  - the size hint comes from the gzip trailer (ISIZE, the length mod 2^32, read with pread for a file),
//    but never beyond what the deflate format can expand the input to (about 1032:1), so a corrupt trailer
//    cannot ask for a huge allocation;
//  - a stream that ends before its trailer is "truncated", bad deflate data is "corrupt"; both are input
//    errors naming the file, and no input can make the loop spin without progress;
//  - concatenated gzip members (as `cat a.gz b.gz` makes) are read as one stream; zero bytes after the
//    last member (padding) are allowed, anything else is garbage.

#include "vram/trace/gzip.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>

#include "vram/core/error.hpp"

namespace vram::detail {

namespace {

constexpr std::size_t input_piece = std::size_t{256} << 10;
constexpr std::size_t min_gzip_size = 18;  // 10-byte header, an empty deflate block, 8-byte trailer

// pre: @p trailer holds the last 4 bytes of a gzip file of @p input_size bytes.
std::size_t gzip_size_hint(std::string_view trailer, std::uint64_t input_size) noexcept {
  const auto* t = reinterpret_cast<const unsigned char*>(trailer.data());
  const std::uint32_t isize =
      std::uint32_t{t[0]} | std::uint32_t{t[1]} << 8 | std::uint32_t{t[2]} << 16 | std::uint32_t{t[3]} << 24;
  return static_cast<std::size_t>(std::min<std::uint64_t>(isize, input_size * max_deflate_ratio));
}

}  // namespace

bool is_gzip(std::string_view bytes) noexcept {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

gzip_inflater::gzip_inflater(std::string_view bytes, const std::string& path)
    : in_(bytes), path_(path), input_size_(bytes.size()) {
  if (bytes.size() >= min_gzip_size) size_hint_ = gzip_size_hint(bytes.substr(bytes.size() - 4), bytes.size());
  if (inflateInit2(&zs_, 15 + 16) != Z_OK) throw error("zlib: inflateInit2 failed");
}

gzip_inflater::gzip_inflater(input_file& file, std::string start)
    : file_(&file), file_buffer_(std::move(start)), path_(file.path()), input_size_(file.size()) {
  in_ = file_buffer_;
  if (input_size_ >= min_gzip_size) {
    char trailer[4];
    if (file.read_at(input_size_ - 4, trailer, 4) == 4) size_hint_ = gzip_size_hint({trailer, 4}, input_size_);
  }
  if (inflateInit2(&zs_, 15 + 16) != Z_OK) throw error("zlib: inflateInit2 failed");
}

gzip_inflater::~gzip_inflater() { inflateEnd(&zs_); }

void gzip_inflater::validate() const {
  if (in_pos_ > in_.size())
    throw invariant_error(fmt::format("gzip_inflater: consumed {} of {} input bytes", in_pos_, in_.size()));
  if (file_ != nullptr && in_.data() != file_buffer_.data())
    throw invariant_error("gzip_inflater: a file's input is not in its buffer");
}

bool gzip_inflater::more_input() {
  if (file_ == nullptr || file_done_) return false;
  const std::size_t keep = in_.size() - in_pos_;
  std::memmove(file_buffer_.data(), file_buffer_.data() + in_pos_, keep);
  // A small file in one read of its size, a larger one (or a pipe) 256 KiB at a time.
  const std::size_t want =
      input_size_ != 0 ? static_cast<std::size_t>(std::min<std::uint64_t>(input_piece, input_size_)) : input_piece;
  file_buffer_.resize(keep + want);
  const std::size_t n = file_->read(file_buffer_.data() + keep, want);
  file_done_ = n < want;
  file_buffer_.resize(keep + n);
  in_ = file_buffer_;
  in_pos_ = 0;
  return n > 0;
}

void gzip_inflater::end_of_member() {
  while (in_.size() - in_pos_ < 2 && more_input()) {
  }
  if (is_gzip(in_.substr(in_pos_))) {
    inflateReset(&zs_);  // another member follows (cat a.gz b.gz)
    return;
  }
  std::uint64_t rest = 0;  // read on to the end, a piece at a time, to name how much follows
  bool padding = true;
  do {
    const std::string_view piece = in_.substr(in_pos_);
    rest += piece.size();
    padding = padding && std::all_of(piece.begin(), piece.end(), [](char c) { return c == '\0'; });
    in_pos_ = in_.size();
  } while (more_input());
  if (!padding)
    throw input_error(fmt::format("{}: corrupt gzip data: {} bytes of garbage after the compressed stream", path_, rest));
  finished_ = true;
}

std::size_t gzip_inflater::read(char* out, std::size_t len) {
#if VRAM_DEBUG_VALIDATE
  validate();
#endif
  std::size_t done = 0;
  while (done < len && !finished_) {
    if (in_pos_ == in_.size()) more_input();
    const std::size_t in_len = std::min<std::size_t>(in_.size() - in_pos_, UINT_MAX);
    const std::size_t out_len = std::min<std::size_t>(len - done, UINT_MAX);
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in_.data() + in_pos_));
    zs_.avail_in = static_cast<uInt>(in_len);
    zs_.next_out = reinterpret_cast<Bytef*>(out + done);
    zs_.avail_out = static_cast<uInt>(out_len);
    const int rc = inflate(&zs_, Z_NO_FLUSH);
    in_pos_ += in_len - zs_.avail_in;
    done += out_len - zs_.avail_out;
    if (rc == Z_STREAM_END) {
      end_of_member();
    } else if (rc == Z_OK || (rc == Z_BUF_ERROR && zs_.avail_out == 0)) {
      continue;
    } else if (rc == Z_BUF_ERROR && in_pos_ == in_.size()) {
      if (!more_input()) throw input_error(fmt::format("{}: truncated gzip stream", path_));
    } else if (rc == Z_MEM_ERROR) {
      throw error(fmt::format("{}: out of host memory while inflating", path_));
    } else {
      throw input_error(
          fmt::format("{}: corrupt gzip data: {}", path_, zs_.msg != nullptr ? zs_.msg : "inflate failed"));
    }
  }
  return done;
}

std::string gzip(std::string_view bytes) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw error("zlib: deflateInit2 failed");
  std::string out;
  out.resize(deflateBound(&zs, static_cast<uLong>(bytes.size())) + 64);
  std::size_t in_pos = 0;
  std::size_t out_pos = 0;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (out_pos == out.size()) out.resize(out.size() * 2);
    const std::size_t in_len = std::min<std::size_t>(bytes.size() - in_pos, UINT_MAX);
    const std::size_t out_len = std::min<std::size_t>(out.size() - out_pos, UINT_MAX);
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + in_pos));
    zs.avail_in = static_cast<uInt>(in_len);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + out_pos);
    zs.avail_out = static_cast<uInt>(out_len);
    const bool last = in_pos + in_len == bytes.size();
    rc = deflate(&zs, last ? Z_FINISH : Z_NO_FLUSH);
    in_pos += in_len - zs.avail_in;
    out_pos += out_len - zs.avail_out;
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      deflateEnd(&zs);
      throw error("zlib: deflate failed");
    }
  }
  deflateEnd(&zs);
  out.resize(out_pos);
  return out;
}

}  // namespace vram::detail
