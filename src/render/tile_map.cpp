// Draws the tile grid of a descriptor instance as framed UTF-8 text.
#include "render/tile_map.h"

#include "render/tile_grid.h"

#include <compilemask/descriptor.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace cm::render {
namespace {

const char* glyph(TileClass c) {
  switch (c) {
    case TileClass::kFull:
      return "██";
    case TileClass::kPartial:
      return "░░";
    case TileClass::kEmpty:
      break;
  }
  return "  ";
}

std::string repeat(const char* s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

std::string summary(const void* blob, int b, int h, const TileGrid& tiles) {
  const desc::Header& hd = desc::header(blob);
  long long counts[3] = {0, 0, 0};
  for (TileClass c : tiles.cells) ++counts[static_cast<int>(c)];
  const unsigned long long visible = desc::mask_of(blob, b, h).visible_pairs;
  const double total = static_cast<double>(hd.nq) * hd.nk;
  char line[256];
  std::snprintf(line, sizeof line,
                "tiles: %lld full, %lld partial, %lld empty; visible pairs %llu (%.2f%%)\n",
                counts[static_cast<int>(TileClass::kFull)],
                counts[static_cast<int>(TileClass::kPartial)],
                counts[static_cast<int>(TileClass::kEmpty)], visible,
                total > 0 ? 100.0 * static_cast<double>(visible) / total : 0.0);
  return line;
}

}  // namespace

std::string format_tile_map(const void* blob, int b, int h, int max_width) {
  const TileGrid tiles = classify_tiles(blob, b, h);
  const desc::Header& hd = desc::header(blob);
  const int fit = std::max(1, (std::max(max_width, 4) - 2) / kCellChars);
  const int factor = std::max(1, (tiles.cols + fit - 1) / fit);
  const TileGrid cells = factor == 1 ? tiles : merge_cells(tiles, factor);

  char head[256];
  std::snprintf(head, sizeof head, "mask (b=%d, h=%d): nq=%d nk=%d, tiles %dx%d, %d x %d tiles", b,
                h, hd.nq, hd.nk, hd.tile_m, hd.tile_n, tiles.rows, tiles.cols);
  std::string out = head;
  if (factor > 1) {
    out += ", one cell = " + std::to_string(factor) + "x" + std::to_string(factor) + " tiles";
  }
  out += "\n┌" + repeat("─", kCellChars * cells.cols) + "┐\n";
  for (int r = 0; r < cells.rows; ++r) {
    out += "│";
    for (int c = 0; c < cells.cols; ++c) out += glyph(cells.at(r, c));
    out += "│\n";
  }
  out += "└" + repeat("─", kCellChars * cells.cols) + "┘\n";
  out += "██ full   ░░ partial   (blank) empty\n";
  out += summary(blob, b, h, tiles);
  return out;
}

}  // namespace cm::render
