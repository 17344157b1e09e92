// The PNG encoder: files decode with libpng to the exact pixels written, and every chunk has
// the structure and CRC the PNG specification requires.
#include "render/png.h"

#include <gtest/gtest.h>
#include <png.h>
#include <zlib.h>

#include <random>
#include <stdexcept>
#include <string>

namespace cm::render {
namespace {

Image random_image(int w, int h, unsigned seed) {
  std::mt19937 rng(seed);
  Image image(w, h, Rgb{});
  for (Rgb& p : image.pixels) {
    p = Rgb{static_cast<uint8_t>(rng()), static_cast<uint8_t>(rng()), static_cast<uint8_t>(rng())};
  }
  return image;
}

uint32_t read_u32(const std::vector<uint8_t>& bytes, size_t at) {
  return (uint32_t{bytes[at]} << 24) | (uint32_t{bytes[at + 1]} << 16) |
         (uint32_t{bytes[at + 2]} << 8) | uint32_t{bytes[at + 3]};
}

TEST(Png, DecodesWithLibpngToTheSamePixels) {
  for (auto [w, h] : {std::pair{1, 1}, std::pair{37, 23}, std::pair{300, 2}}) {
    const Image image = random_image(w, h, static_cast<unsigned>(w * 1000 + h));
    const std::vector<uint8_t> file = encode_png(image);

    png_image decoded{};
    decoded.version = PNG_IMAGE_VERSION;
    ASSERT_NE(png_image_begin_read_from_memory(&decoded, file.data(), file.size()), 0)
        << decoded.message;
    decoded.format = PNG_FORMAT_RGB;
    std::vector<uint8_t> rgb(PNG_IMAGE_SIZE(decoded));
    ASSERT_NE(png_image_finish_read(&decoded, nullptr, rgb.data(), 0, nullptr), 0)
        << decoded.message;
    ASSERT_EQ(decoded.width, static_cast<uint32_t>(w));
    ASSERT_EQ(decoded.height, static_cast<uint32_t>(h));
    for (size_t i = 0; i < image.pixels.size(); ++i) {
      ASSERT_EQ(rgb[3 * i], image.pixels[i].r) << "pixel " << i;
      ASSERT_EQ(rgb[3 * i + 1], image.pixels[i].g) << "pixel " << i;
      ASSERT_EQ(rgb[3 * i + 2], image.pixels[i].b) << "pixel " << i;
    }
  }
}

TEST(Png, ChunksAreIhdrIdatIendWithValidCrcs) {
  const std::vector<uint8_t> file = encode_png(random_image(5, 4, 7));
  const std::vector<uint8_t> signature = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  ASSERT_TRUE(std::equal(signature.begin(), signature.end(), file.begin()));
  std::vector<std::string> types;
  size_t at = signature.size();
  while (at < file.size()) {
    ASSERT_LE(at + 12, file.size());
    const uint32_t length = read_u32(file, at);
    ASSERT_LE(at + 12 + length, file.size());
    types.emplace_back(file.begin() + at + 4, file.begin() + at + 8);
    const uLong crc = crc32(0L, file.data() + at + 4, length + 4);
    EXPECT_EQ(read_u32(file, at + 8 + length), static_cast<uint32_t>(crc)) << types.back();
    if (types.back() == "IHDR") {
      ASSERT_EQ(length, 13u);
      EXPECT_EQ(read_u32(file, at + 8), 5u);   // width
      EXPECT_EQ(read_u32(file, at + 12), 4u);  // height
      EXPECT_EQ(file[at + 16], 8);             // bit depth
      EXPECT_EQ(file[at + 17], 2);             // truecolour
    }
    at += 12 + length;
  }
  EXPECT_EQ(types, (std::vector<std::string>{"IHDR", "IDAT", "IEND"}));
}

TEST(Png, RejectsEmptyAndInconsistentImages) {
  EXPECT_THROW(encode_png(Image{}), std::invalid_argument);
  Image bad(3, 3, Rgb{});
  bad.pixels.pop_back();
  EXPECT_THROW(encode_png(bad), std::invalid_argument);
}

TEST(Png, WriteReportsAnUnwritablePath) {
  try {
    write_png("/nonexistent-dir/x.png", Image(1, 1, Rgb{}));
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.png"), std::string::npos);
  }
}

}  // namespace
}  // namespace cm::render
