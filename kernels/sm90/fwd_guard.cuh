// The forward loader warp's guard (FwdParams::zero_unseen: packed or paged K/V). A masked key
// tile sets the scores of the keys a row does not see to -inf, but P V multiplies those zero
// probabilities with whatever V rows the stage holds, and 0 * NaN is NaN. So the V rows that no
// row of a masked tile sees (a narrow tile's rows past its keys, a shorter sequence's keys below
// nk, a cache page's unused slots) are zeroed before any consumer multiplies with them. The
// strided layout goes without: it reads zeros past nk (TMA out of bounds), its keys below nk are
// the caller's own tensor, and the guard would cost its masked tiles 1-31% (perf-notes, session
// 36).
//
// The loader (fwd_loader.cuh) lands such a V stage on v_loaded instead of v_full. The whole
// loader warp then waits for the load and for the keys the tile's rows see (the mask warps'
// unions in the tile's mask slot, fwd_masker.cuh), zeroes the others and completes v_full, on
// which the consumers wait. Lanes 1-31 spinning on barriers of their own beside the loader lane
// slowed the loader on every tile (the same structure cost the packed backward 9.5%, session 38).
#pragma once

#include "fwd_config.cuh"
#include "sync.cuh"
#include "tile_mask.cuh"
#include "zero_rows.cuh"

namespace cm::sm90 {

// Whether key column c of a tile is set in quad-ordered bits (tile_mask.cuh: column 8j + 2q + e
// is bit 2j + e of word q). The word is picked by selects: indexed, the four words would live in
// local memory.
__device__ __forceinline__ bool column_bit(const QuadBits& bits, int c) {
  const int q = (c >> 1) & 3;
  const uint32_t word =
      q < 2 ? (q == 0 ? bits.quad[0] : bits.quad[1]) : (q == 2 ? bits.quad[2] : bits.quad[3]);
  return (word >> (2 * (c >> 3) + (c & 1))) & 1u;
}

// Zeroes the rows of V stage `stage`, which holds keys [first_key, first_key + kStageKeys) of a
// masked tile, whose keys no row of the tile sees (not set in `seen`). Not inlined: inlined into
// the loader's loop, it made ptxas spill there.
template <class Config>
__device__ __noinline__ void zero_unseen_keys(typename Config::Element* stage, QuadBits seen,
                                              int first_key, int lane) {
  constexpr int kKeys = Config::kStageKeys;
  const uint32_t part_bits = low_bits(kKeys / 4) << (first_key / 4);  // in each quad word
  if ((seen.quad[0] & seen.quad[1] & seen.quad[2] & seen.quad[3] & part_bits) == part_bits) return;
  zero_rows<Config, kKeys>(stage, lane,
                           [&](int row) { return !column_bit(seen, first_key + row); });
}

// The loader warp's state for the guard: the masked tiles' mask slots, which it reads in the
// consumers' order (at each masked tile's first stage), per K/V slot the parity of the next load
// that lands on v_loaded, and the stage that waits to be zeroed.
//
// A guarded stage is zeroed after the loader has issued the next stage's K (defer, then finish):
// waiting for the V load to land before that left the consumers waiting for the next K after
// every masked tile. The next K's stage is released after the products of an earlier tile, so
// issuing it first cannot wait on the deferred stage.
template <class Config>
class UnseenKeyGuard {
 public:
  // Takes V stage `slot`, which holds part tile.part of a masked tile and was loaded onto
  // v_loaded[slot]; the next finish() zeroes and releases it.
  __device__ void defer(KeyTileInfo tile, int slot) {
    deferred_ = tile;
    deferred_slot_ = slot;
  }

  // Zeroes the rows of the deferred V stage, if any, whose keys no row of its tile sees; then
  // completes its v_full. Every lane of the warp calls it. The k-th load onto a slot's v_loaded
  // completes phase k, and the loader issues no later one into the slot before this call.
  __device__ void finish(typename Config::SharedStorage& ss, int lane) {
    if (deferred_slot_ < 0) return;
    const int slot = deferred_slot_;
    deferred_slot_ = -1;
    if (deferred_.first) {
      wait_barrier(ss.mask_full[mask_slot_.stage], mask_slot_.phase);
      seen_ = ss.seen[mask_slot_.stage][0];
      CUTE_UNROLL
      for (int w = 1; w < Config::kMaskWarps; ++w) seen_ |= ss.seen[mask_slot_.stage][w];
      arrive_per_warp(ss.mask_empty[mask_slot_.stage]);  // after every lane's reads
      mask_slot_.advance();
    }
    wait_barrier(ss.v_loaded[slot], (loaded_phase_ >> slot) & 1u);
    loaded_phase_ ^= 1u << slot;
    constexpr int kKeys = Config::kStageKeys;
    zero_unseen_keys<Config>(ss.v + slot * kKeys * Config::kHeadDim, seen_,
                             Config::kTileParts == 1 ? 0 : deferred_.part * kKeys, lane);
    complete_after_zeros(ss.v_full[slot], lane);
  }

 private:
  PipeState<Config::kMaskSlots> mask_slot_;
  uint32_t loaded_phase_ = 0;  // bit s: the parity of slot s's next load onto v_loaded
  QuadBits seen_{};            // the keys some row of the current masked tile sees
  KeyTileInfo deferred_{};
  int deferred_slot_ = -1;  // none
};

}  // namespace cm::sm90
