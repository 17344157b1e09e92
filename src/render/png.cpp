// PNG encoding (ISO/IEC 15948): signature, IHDR, IDAT (zlib stream of filtered scanlines), IEND.
// Every chunk is length, type, data, CRC-32 of type and data; integers are big-endian.
#include "render/png.h"

#include <zlib.h>

#include <array>
#include <fstream>
#include <stdexcept>

namespace cm::render {
namespace {

constexpr std::array<uint8_t, 8> kSignature = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
constexpr uint8_t kColorTypeRgb = 2;
constexpr uint8_t kFilterNone = 0;

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

void put_chunk(std::vector<uint8_t>& out, const char (&type)[5], const std::vector<uint8_t>& data) {
  put_u32(out, static_cast<uint32_t>(data.size()));
  const size_t type_at = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  // The CRC covers the type and the data, not the length.
  const uLong crc = crc32(0L, out.data() + type_at, static_cast<uInt>(4 + data.size()));
  put_u32(out, static_cast<uint32_t>(crc));
}

std::vector<uint8_t> header_chunk(const Image& image) {
  std::vector<uint8_t> data;
  put_u32(data, static_cast<uint32_t>(image.width));
  put_u32(data, static_cast<uint32_t>(image.height));
  data.push_back(8);              // bit depth
  data.push_back(kColorTypeRgb);  // colour type
  data.push_back(0);              // compression method: deflate
  data.push_back(0);              // filter method: adaptive (we use filter type None per row)
  data.push_back(0);              // no interlace
  return data;
}

std::vector<uint8_t> compressed_scanlines(const Image& image) {
  const size_t row_bytes = 1 + 3 * static_cast<size_t>(image.width);
  std::vector<uint8_t> raw(row_bytes * image.height);
  for (int y = 0; y < image.height; ++y) {
    uint8_t* row = raw.data() + row_bytes * y;
    row[0] = kFilterNone;
    for (int x = 0; x < image.width; ++x) {
      const Rgb& p = image.at(x, y);
      row[1 + 3 * x] = p.r;
      row[2 + 3 * x] = p.g;
      row[3 + 3 * x] = p.b;
    }
  }
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::vector<uint8_t> packed(size);
  if (compress2(packed.data(), &size, raw.data(), static_cast<uLong>(raw.size()),
                Z_BEST_COMPRESSION) != Z_OK) {
    throw std::runtime_error("png: zlib compression failed");
  }
  packed.resize(size);
  return packed;
}

}  // namespace

std::vector<uint8_t> encode_png(const Image& image) {
  if (image.width <= 0 || image.height <= 0) {
    throw std::invalid_argument("png: image must be at least 1x1, got " +
                                std::to_string(image.width) + "x" + std::to_string(image.height));
  }
  if (image.pixels.size() != static_cast<size_t>(image.width) * image.height) {
    throw std::invalid_argument("png: pixel count does not match the image size");
  }
  std::vector<uint8_t> out(kSignature.begin(), kSignature.end());
  put_chunk(out, "IHDR", header_chunk(image));
  put_chunk(out, "IDAT", compressed_scanlines(image));
  put_chunk(out, "IEND", {});
  return out;
}

void write_png(const std::string& path, const Image& image) {
  const std::vector<uint8_t> bytes = encode_png(image);
  std::ofstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error("cannot open '" + path + "' for writing");
  file.write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  if (!file) throw std::runtime_error("cannot write '" + path + "'");
}

}  // namespace cm::render
