// A PNG-ready picture of one descriptor instance: the element mask (left) next to its tile
// classes (right), both on the same scale.
#pragma once

#include "render/png.h"

namespace cm::render {

struct MaskImageOptions {
  int max_side = 1024;  // larger masks are downsampled so no panel side exceeds this (pixels)
  int min_side = 256;   // smaller masks are magnified by an integer factor up to this size
};

// Layout: two panels of equal size side by side, each framed, kImageMargin pixels around and
// between them. The element panel starts at (kImageMargin, kImageMargin), the tile panel at
// (2 * kImageMargin + panel_width, kImageMargin).
inline constexpr int kImageMargin = 8;

// Colours of the two panels.
inline constexpr Rgb kBackground{255, 255, 255};
inline constexpr Rgb kFrame{128, 128, 128};
inline constexpr Rgb kVisible{31, 73, 125};   // element panel: visible (hidden is background)
inline constexpr Rgb kFullTile{31, 73, 125};  // tile panel
inline constexpr Rgb kPartialTile{242, 169, 59};
inline constexpr Rgb kEmptyTile{235, 235, 235};

// Precondition: `blob` is a valid descriptor; (b, h) inside its batch x heads grid (else
// std::invalid_argument). Each element-panel pixel shows the visible fraction of the block of
// (query, key) pairs it covers, blended from background to kVisible; each tile-panel pixel
// shows the merged class (see merge_cells) of the tiles under it, with tile borders drawn when
// tiles are at least 6 pixels wide. Reads visibility from the descriptor's runs and patterns in
// O(rows x intervals + pixels), never per (q, k) pair.
Image render_mask_image(const void* blob, int b, int h, const MaskImageOptions& options = {});

}  // namespace cm::render
