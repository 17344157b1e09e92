// A minimal PNG encoder: 8-bit RGB images, one IDAT chunk compressed with zlib.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cm::render {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  friend bool operator==(const Rgb&, const Rgb&) = default;
};

// A row-major RGB image.
struct Image {
  int width = 0;
  int height = 0;
  std::vector<Rgb> pixels;  // width * height

  Image() = default;
  Image(int w, int h, Rgb fill) : width(w), height(h), pixels(static_cast<size_t>(w) * h, fill) {}
  Rgb& at(int x, int y) { return pixels[static_cast<size_t>(y) * width + x]; }
  const Rgb& at(int x, int y) const { return pixels[static_cast<size_t>(y) * width + x]; }
};

// The PNG file bytes of `image`. Throws std::invalid_argument for an empty image or one whose
// pixel count does not match its size.
std::vector<uint8_t> encode_png(const Image& image);

// Writes encode_png(image) to `path`. Throws std::runtime_error naming the path if it cannot.
void write_png(const std::string& path, const Image& image);

}  // namespace cm::render
