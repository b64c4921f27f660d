// gzip through zlib. Design decisions:
//  - the inflated buffer is sized once from the gzip trailer (ISIZE, the length mod 2^32), but never beyond
//    what the deflate format can expand the input to (about 1032:1), so a corrupt trailer cannot ask for a
//    huge allocation; it grows by doubling if the hint was short;
//  - a stream that ends before its trailer is "truncated", bad deflate data is "corrupt"; both are input
//    errors naming the file, and no input can make the loop spin without progress;
//  - concatenated gzip members (as `cat a.gz b.gz` makes) are read as one stream.

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

constexpr std::size_t max_deflate_ratio = 1032;

std::size_t gzip_size_hint(std::string_view bytes) noexcept {
  if (bytes.size() < 18) return 0;
  const auto* t = reinterpret_cast<const unsigned char*>(bytes.data() + bytes.size() - 4);
  const std::uint32_t isize =
      std::uint32_t{t[0]} | std::uint32_t{t[1]} << 8 | std::uint32_t{t[2]} << 16 | std::uint32_t{t[3]} << 24;
  return std::min<std::size_t>(isize, bytes.size() * max_deflate_ratio);
}

}  // namespace

bool is_gzip(std::string_view bytes) noexcept {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

gzip_inflater::gzip_inflater(std::string_view bytes, const std::string& path)
    : in_(bytes), path_(path), size_hint_(gzip_size_hint(bytes)) {
  if (inflateInit2(&zs_, 15 + 16) != Z_OK) throw error("zlib: inflateInit2 failed");
}

gzip_inflater::~gzip_inflater() { inflateEnd(&zs_); }

void gzip_inflater::validate() const {
  if (in_pos_ > in_.size())
    throw invariant_error(fmt::format("gzip_inflater: consumed {} of {} input bytes", in_pos_, in_.size()));
}

std::size_t gzip_inflater::read(char* out, std::size_t len) {
#if VRAM_DEBUG_VALIDATE
  validate();
#endif
  std::size_t done = 0;
  while (done < len && !finished_) {
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
      const std::string_view rest = in_.substr(in_pos_);
      if (is_gzip(rest)) {
        inflateReset(&zs_);  // another member follows (cat a.gz b.gz)
        continue;
      }
      if (!std::all_of(rest.begin(), rest.end(), [](char c) { return c == '\0'; }))
        throw input_error(
            fmt::format("{}: corrupt gzip data: {} bytes of garbage after the compressed stream", path_, rest.size()));
      finished_ = true;
    } else if (rc == Z_OK || (rc == Z_BUF_ERROR && zs_.avail_out == 0)) {
      continue;
    } else if (rc == Z_BUF_ERROR && in_pos_ == in_.size()) {
      throw input_error(fmt::format("{}: truncated gzip stream", path_));
    } else if (rc == Z_MEM_ERROR) {
      throw error(fmt::format("{}: out of host memory while inflating", path_));
    } else {
      throw input_error(
          fmt::format("{}: corrupt gzip data: {}", path_, zs_.msg != nullptr ? zs_.msg : "inflate failed"));
    }
  }
  return done;
}

std::string gunzip(std::string_view bytes, const std::string& path) {
  gzip_inflater in(bytes, path);
  std::string out;
  out.resize(std::max<std::size_t>(in.size_hint(), 1 << 16));
  std::size_t have = 0;
  for (;;) {
    have += in.read(out.data() + have, out.size() - have);
    if (in.finished()) break;
    out.resize(out.size() * 2);
  }
  out.resize(have);
  return out;
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
