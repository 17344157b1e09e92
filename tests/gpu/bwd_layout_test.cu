// Host-side checks of the layout facts the sm90 backward kernel (kernels/sm90/bwd_kernel.cuh)
// computes by hand, against CuTe's own layouts and MMA partitioning. Runs without a GPU:
//   * the shared-memory tiles are laid out as TMA writes 128-byte-swizzled 64-column boxes,
//     and the transposed ("t") views address the same bytes;
//   * ds_offset() is the physical offset of LayoutdS, and (head dim 256) of LayoutdSt transposed;
//   * Fragment's (row, column) of accumulator element i is CuTe's for every thread and MMA;
//   * an Sᵀ accumulator read through AccAsA is the A operand fragment of MmadV (and MmadK).
#include "bwd_kernel.cuh"

#include <gtest/gtest.h>

#include <cstdint>

namespace {

using namespace cm::sm90;
using Bf16 = cutlass::bfloat16_t;

constexpr uintptr_t kBase = uintptr_t{1} << 20;  // 1024-byte aligned, like the kernel's tiles

template <class Layout>
auto smem_tensor() {
  return make_tensor(make_smem_ptr(reinterpret_cast<Bf16*>(kBase)), Layout{});
}

template <class Ptr>
long element_of(Ptr p) {
  return static_cast<long>((reinterpret_cast<uintptr_t>(&*p) - kBase) / sizeof(Bf16));
}

// Where TMA puts element (row, col) of a rows x head_dim tile loaded as 64-column boxes with
// the 128-byte swizzle: 16-byte chunk c of 128-byte line L moves to chunk c ^ (L % 8).
long tma_box_offset(int rows, int row, int col) {
  return long{col / 64} * rows * 64 + long{row} * 64 + 8 * (((col % 64) / 8) ^ (row % 8)) + col % 8;
}

// A stage ring of step rows (Q or dO, kColumns columns) and its transposed view.
template <class C, class Rows, class RowsT, int kColumns>
void check_rows(const char* name) {
  auto rows = smem_tensor<Rows>();
  auto rows_t = smem_tensor<RowsT>();
  for (int s = 0; s < C::kStages; ++s) {
    for (int r = 0; r < C::kBlockM; ++r) {
      for (int d = 0; d < kColumns; ++d) {
        const long expected = long{s} * C::kBlockM * kColumns + tma_box_offset(C::kBlockM, r, d);
        ASSERT_EQ(element_of(&rows(r, d, s)), expected) << name << " r=" << r << " d=" << d;
        ASSERT_EQ(element_of(&rows_t(d, r, s)), expected) << name << "t r=" << r << " d=" << d;
      }
    }
  }
}

template <int kHeadDim, int kHeadDimV>
void check_tiles() {
  using C = BwdConfig<Bf16, kHeadDim, kHeadDimV>;
  check_rows<C, typename C::LayoutQ, typename C::LayoutQt, kHeadDim>("Q");
  check_rows<C, typename C::LayoutdO, typename C::LayoutdOt, kHeadDimV>("dO");
  auto k = smem_tensor<typename C::LayoutK>();
  auto kt = smem_tensor<typename C::LayoutKt>();
  auto v = smem_tensor<typename C::LayoutV>();
  for (int r = 0; r < C::kBlockN; ++r) {
    for (int d = 0; d < kHeadDim; ++d) {
      const long expected = tma_box_offset(C::kBlockN, r, d);
      ASSERT_EQ(element_of(&k(r, d)), expected) << "K r=" << r << " d=" << d;
      ASSERT_EQ(element_of(&kt(d, r)), expected) << "Kt r=" << r << " d=" << d;
    }
    for (int d = 0; d < kHeadDimV; ++d) {
      ASSERT_EQ(element_of(&v(r, d)), tma_box_offset(C::kBlockN, r, d)) << "V r=" << r;
    }
  }
  auto ds = smem_tensor<typename C::LayoutdS>();
  auto dst = smem_tensor<typename C::LayoutdSt>();
  for (int row = 0; row < C::kBlockM; ++row) {
    for (int key = 0; key < C::kBlockN; ++key) {
      ASSERT_EQ(element_of(&ds(row, key)), ds_offset(row, key)) << "dS " << row << "," << key;
      if constexpr (C::kSplitHeadDim) {  // only there is dSᵀ read from shared memory
        ASSERT_EQ(element_of(&dst(key, row)), ds_offset(row, key)) << "dSt " << key << "," << row;
      }
    }
  }
}

TEST(BackwardLayout, SharedTilesMatchTmaBoxesAndHandOffsets) {
  check_tiles<64, 64>();
  check_tiles<128, 128>();
  check_tiles<256, 256>();
  check_tiles<256, 128>();
}

// Checks Fragment against CuTe for an MMA whose warpgroups split M (kSplitM) or N.
template <class Mma, int kM, int kN, bool kSplitM>
void check_fragment() {
  Mma mma;
  for (int tid = 0; tid < 256; ++tid) {
    auto coords =
        mma.get_thread_slice(tid).partition_C(make_identity_tensor(Shape<Int<kM>, Int<kN>>{}));
    const Fragment frag(tid);
    const int wg = tid / 128;
    ASSERT_EQ(size(coords), 2 * 2 * ((kSplitM ? kN : kN / 2) / 8));
    for (int i = 0; i < size(coords); ++i) {
      const int row = (kSplitM ? 64 * wg : 0) + frag.row0 + 8 * ((i / 2) % 2);
      const int col = (kSplitM ? 0 : kN / 2 * wg) + frag.col0 + 8 * (i / 4) + i % 2;
      ASSERT_EQ(get<0>(coords(i)), row) << "tid " << tid << " i " << i;
      ASSERT_EQ(get<1>(coords(i)), col) << "tid " << tid << " i " << i;
      ASSERT_EQ(frag.r8, row % 8);
      ASSERT_EQ(i, Fragment::index(i % 2, (i / 2) % 2, i / 4));
    }
  }
}

// The warpgroups split the keys (M) of Sᵀ, dPᵀ, dK and dV, or with the head dim split their
// query rows and head-dim columns (N); they always split dQ's head dim.
template <int kHeadDim, int kHeadDimV>
void check_fragments() {
  using C = BwdConfig<Bf16, kHeadDim, kHeadDimV>;
  constexpr bool kSplitKeys = !C::kSplitHeadDim;
  check_fragment<typename C::MmaS, C::kBlockN, C::kBlockM, kSplitKeys>();
  check_fragment<typename C::MmadP, C::kBlockN, C::kBlockM, kSplitKeys>();
  check_fragment<typename C::MmadK, C::kBlockN, kHeadDim, kSplitKeys>();
  check_fragment<typename C::MmadV, C::kBlockN, kHeadDimV, kSplitKeys>();
  check_fragment<typename C::MmaQ, C::kBlockM, kHeadDim, false>();
}

TEST(BackwardLayout, FragmentCoordinatesMatchCute) {
  check_fragments<64, 64>();
  check_fragments<128, 128>();
  check_fragments<256, 256>();
  check_fragments<256, 128>();
}

TEST(BackwardLayout, AccumulatorIsTheRegisterAOperand) {
  using C = BwdConfig<Bf16, 128, 128>;
  typename C::MmaS mma_sdp;
  typename C::MmadV mma_kv;
  const typename C::AccAsA acc_as_a;
  for (int tid = 0; tid < 256; ++tid) {
    auto acc = mma_sdp.get_thread_slice(tid).partition_C(
        make_identity_tensor(Shape<Int<C::kBlockN>, Int<C::kBlockM>>{}));
    auto a = mma_kv.get_thread_slice(tid).partition_A(
        make_identity_tensor(Shape<Int<C::kBlockN>, Int<C::kBlockM>>{}));
    ASSERT_EQ(size(a), size(acc));
    ASSERT_EQ(size<2>(a), size<2>(acc_as_a)) << "k-blocks";
    for (int v = 0; v < size<0>(a); ++v) {
      for (int kb = 0; kb < size<2>(a); ++kb) {
        const int i = acc_as_a(v, 0, kb);
        ASSERT_EQ(get<0>(a(v, 0, kb)), get<0>(acc(i))) << "tid " << tid << " v " << v;
        ASSERT_EQ(get<1>(a(v, 0, kb)), get<1>(acc(i))) << "tid " << tid << " v " << v;
      }
    }
  }
}

TEST(BackwardLayout, DqChunkSwizzleIsAPermutationOfEachRow) {
  for (int chunks : {8, 16, 32}) {
    for (int row = 0; row < 64; ++row) {
      uint32_t seen = 0;
      for (int c = 0; c < chunks; ++c) {
        const int s = dq_chunk_swizzle(row, c);
        ASSERT_GE(s, 0);
        ASSERT_LT(s, chunks);
        seen |= 1u << s;
      }
      ASSERT_EQ(seen, (uint64_t{1} << chunks) - 1);
    }
  }
}

}  // namespace
