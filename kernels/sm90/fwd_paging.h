// Paged K and V in the forward (cm::cuda::PagedKV): where a K/V stage's key rows come from.
// The K and V tensor maps of a paged launch are (head_dim, page_size rows, heads_kv, num_pages),
// so a page index is the map's batch coordinate and one that is out of range reads as zeros.
// Host and device code: tests/gpu/fwd_paging_test.cu checks the boxes on the CPU.
#pragma once

#include <compilemask/cuda_limits.h>
#include <compilemask/descriptor.h>

#include <stdint.h>

namespace cm::sm90 {

// Page sizes below a stage's keys take one TMA box per page (cuda_limits.h: page sizes).
using cuda::kMinPageSize;

// Rows of the K/V maps' boxes: the stage's keys, or one page when pages are smaller.
CM_HD int kv_box_rows(int page_size, int stage_keys) {
  return page_size > 0 && page_size < stage_keys ? page_size : stage_keys;
}

// The TMA boxes that load the paged stage whose first key is first_key: one of stage_keys rows,
// or with pages smaller than that one per page, each box_rows rows. Boxes that would start at or
// past nk are not loaded, so the page table is read only for the sequence's own pages (the
// stage's rows past nk are masked, and zeroed in V: FwdParams::zero_unseen). Without pages the
// loader takes one box from the row.
CM_HD int stage_boxes(int page_size, int stage_keys, int nk, int first_key) {
  const int box_rows = kv_box_rows(page_size, stage_keys);
  const int left = (nk - first_key + box_rows - 1) / box_rows;
  return left < stage_keys / box_rows ? left : stage_keys / box_rows;
}

// A box's coordinates in the K/V maps.
struct KeyBox {
  int row, batch;
};

// Where key `key` of sequence b starts a box: row key % page_size of page
// page_table[b * page_table_stride + key / page_size].
CM_HD KeyBox paged_box(const int32_t* page_table, int64_t page_table_stride, int page_size, int b,
                       int key) {
  return {key % page_size, page_table[b * page_table_stride + key / page_size]};
}

}  // namespace cm::sm90
