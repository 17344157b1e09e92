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

// A box's coordinates in the K/V maps.
struct KeyBox {
  int row, batch;
};

// The TMA boxes of a paged launch's stages, settled once per launch. A stage of stage_keys keys
// from first_key (a multiple of stage_keys) takes one box of stage_keys rows, or with pages
// smaller than that one per page. Boxes are 16, 32, 64 or 128 rows, powers of two, so a stage's
// boxes cost shifts: a division per box kept the loader busy for longer than the stage's bytes
// take to arrive (pages of 16 rows decoded at 1.87x contiguous K/V's time; perf-notes, session
// 37). Boxes that would start at or past nk are not loaded, so the page table is read only for
// the sequence's own pages (the stage's rows past nk are masked, and zeroed in V:
// FwdParams::zero_unseen).
class PagedBoxes {
 public:
  CM_HD PagedBoxes(int page_size, int stage_keys)
      : page_size_(page_size), max_boxes_(stage_keys / kv_box_rows(page_size, stage_keys)) {
    while ((1 << shift_) < kv_box_rows(page_size, stage_keys)) ++shift_;
  }

  CM_HD int rows() const { return 1 << shift_; }

  // Fills box[0, n) for the stage whose first key is first_key, of the sequence whose page-table
  // row is table_row, and returns n. All n page-table loads are issued before any is used.
  template <int kMaxBoxes>
  CM_HD int stage(const int32_t* table_row, int nk, int first_key, KeyBox (&box)[kMaxBoxes]) const {
    const int left = (nk - first_key + rows() - 1) >> shift_;
    const int boxes = left < max_boxes_ ? left : max_boxes_;
    if (max_boxes_ == 1) {  // a stage within one page: the one division of the stage
      box[0] = {first_key % page_size_, table_row[first_key / page_size_]};
      return 1;
    }
    const int first_page = first_key >> shift_;
    const int last_page = first_page + boxes - 1;
    for (int i = 0; i < kMaxBoxes; ++i) {
      const int page = first_page + i;
      box[i] = {0, table_row[page < last_page ? page : last_page]};
    }
    return boxes;
  }

 private:
  int page_size_;
  int max_boxes_;  // boxes per stage
  int shift_ = 0;  // log2 of the boxes' rows
};

}  // namespace cm::sm90
