// The rows of a packed layout's outputs that no main kernel writes, written by one small kernel
// (packed_rows.cu) after each pass:
//   - the rows of a sequence that does not fit its tensors (sequence_fits, problem_shape.h),
//     which the passes skip: NaN where they lie in the tensors, so that bad offsets show in
//     every result;
//   - with PackedRowsParams::write_outside, the rows that lie in no sequence: written as rows
//     that see no key (O, dQ, dK, dV 0; the LSE -inf), so that a caller need not zero-fill whole
//     tensors first (one more pass over each, 40 us at 32K x 16 heads x 128).
// A row of a sequence that does not fit is NaN even where a sequence that fits shares it.
// The classification (cover_rows) is host-callable: tests/gpu/kernel_walk_test.cu checks it.
#pragma once

#include "problem_shape.h"

#include <cuda_runtime_api.h>
#include <stdint.h>

namespace cm::sm90 {

// 0x7fff is a NaN as bfloat16 and as float16 (every exponent bit set, a nonzero fraction), and
// 0x7fff7fff is one as float32: one word serves O, dQ, dK, dV and the LSE.
inline constexpr uint32_t kNanWord = 0x7fff7fffu;
inline constexpr uint32_t kNegInfWord = 0xff800000u;  // float32 -inf, the LSE of an unseen row

// One output tensor of an axis: row r of head h at base + r * row_stride + h * head_stride
// (bytes), of which the first row_bytes (a multiple of 4) are written.
struct RowsTensor {
  void* base;
  int64_t row_stride, head_stride;
  int32_t row_bytes;
  uint32_t outside_word;  // what a row outside every sequence gets, in each 4-byte word
};

// The outputs whose rows are the queries' (keys = false: O and the LSE, or dQ) or the keys'
// (dK and dV).
struct RowsAxis {
  bool keys;
  int32_t heads;
  int32_t num_tensors;
  RowsTensor tensors[2];
};

struct PackedRowsParams {
  ProblemShape shape;  // the packed layout's (q_offsets set)
  bool write_outside;  // cm::cuda::Problem::write_rows_outside_sequences
  int32_t num_axes;
  RowsAxis axes[2];
};

// Rows per block of packed_rows.cu, each classified in a shared word of kCover bits.
inline constexpr int kCoverRows = 256;
inline constexpr uint32_t kCoverFit = 1;    // in a sequence that fits: its pass wrote the row
inline constexpr uint32_t kCoverUnfit = 2;  // in one that does not: NaN

// Marks rows first + [0, count) of the axis's tensors (count <= kCoverRows) in cover[] with the
// kCover bits of the sequences b = b_begin, b_begin + b_step, ... that hold them; the callers
// (the threads of a block, or one host loop) share cover[], zeroed first.
CM_HD void cover_rows(const ProblemShape& s, bool keys, int64_t first, int count, int b_begin,
                      int b_step, uint32_t* cover) {
  const int32_t* offsets = keys ? s.k_offsets : s.q_offsets;
  const int64_t n = keys ? s.nk : s.nq;
  for (int b = b_begin; b < s.batch; b += b_step) {
    const int64_t begin = offsets[b] > first ? int64_t{offsets[b]} : first;
    const int64_t end = offsets[b] + n < first + count ? offsets[b] + n : first + count;
    if (begin >= end) continue;
    const uint32_t bit = sequence_fits(s, b) ? kCoverFit : kCoverUnfit;
    for (int64_t r = begin - first; r < end - first; ++r) {
#ifdef __CUDA_ARCH__
      atomicOr(&cover[r], bit);
#else
      cover[r] |= bit;
#endif
    }
  }
}

// Whether a row of this cover is left to packed_rows.cu (else its pass wrote it, or it lies
// in no sequence and the caller keeps it).
CM_HD bool row_left(uint32_t cover, bool write_outside) {
  return (cover & kCoverUnfit) != 0 || (cover == 0 && write_outside);
}

// The word packed_rows.cu writes in a row it is left, in a tensor whose rows outside every
// sequence get `outside`.
CM_HD uint32_t row_word(uint32_t cover, uint32_t outside) {
  return (cover & kCoverUnfit) != 0 ? kNanWord : outside;
}

// Launches packed_rows.cu as the programmatic dependent of the stream's last kernel (the pass's
// final one), so that its NaN rows are written last.
cudaError_t launch_packed_rows(const PackedRowsParams& params, cudaStream_t stream);

}  // namespace cm::sm90
