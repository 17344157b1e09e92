// Where the forward's consumer threads hold their rows of O, and where the epilogue stages O in
// shared memory before writing it out (fwd_consumer.cuh). Host-callable, so that
// tests/gpu/fwd_staging_test.cu checks on the CPU the identities the epilogue's addressing
// relies on.
#pragma once

#include <compilemask/descriptor.h>  // CM_HD

namespace cm::sm90 {

// Tile-relative row of consumer thread t's accumulator row 0; its row 1 is 8 below. Warpgroup
// t / 128 owns rows [64 wg, 64 wg + 64), each of its warps 16 rows, each quad of lanes one row.
CM_HD int fwd_first_row(int t) {
  return 64 * (t / 128) + 16 * ((t % 128) / 32) + (t % 32) / 4;
}

// Element offset of (row, column) in a Q buffer of kBlockM rows reused to stage O. It keeps the
// Q tile's own organisation (column blocks of 64 elements, each row a 128-byte line), so a
// warpgroup's rows occupy exactly the bytes of its own Q rows: the other warpgroup may still be
// reading its Q rows with wgmma. The 16-byte chunks are XOR-swizzled by row % 8, so both the
// fragment writes (8 rows per warp instruction) and the 16-byte row reads are free of bank
// conflicts.
template <int kBlockM>
CM_HD int fwd_staged(int row, int col) {
  return (col >> 6) * (kBlockM * 64) + row * 64 + ((((col & 63) >> 3) ^ (row & 7)) << 3) +
         (col & 7);
}

}  // namespace cm::sm90
