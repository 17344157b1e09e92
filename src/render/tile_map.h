// The ASCII tile map of one descriptor instance: a framed grid with █ full, ░ partial and blank
// empty tiles, a legend and a summary line (in the spirit of FlexAttention's BlockMask repr).
#pragma once

#include <string>

namespace cm::render {

// Every cell is drawn two characters wide so tiles look roughly square on a terminal.
inline constexpr int kCellChars = 2;

// Precondition: `blob` is a valid descriptor; (b, h) is inside its batch x heads grid (else
// std::invalid_argument). The grid is at most `max_width` terminal columns wide including the
// frame: when the tiles do not fit, square blocks of tiles are merged (see merge_cells) and the
// header line says how many tiles one cell stands for. max_width below 4 counts as 4.
std::string format_tile_map(const void* blob, int b, int h, int max_width);

}  // namespace cm::render
