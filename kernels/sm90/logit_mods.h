// Which modifications of the logits a kernel variant is compiled for: a bit mask, the kernels'
// template argument kLogitMods. Each is a compile-time choice, so that neither costs the kernels
// without it: tested at run time, the cap's branch alone made the forward's serial mainloop at
// head dim 128 spill (ptxas), and the cap's and ALiBi's branches together made every forward
// variant spill 116 bytes and the backward's 8 to 16 (session 55).
#pragma once

namespace cm::sm90 {

inline constexpr int kCappedLogits = 1;  // soft-capped (FwdParams::softcap_scale is not 0)
inline constexpr int kAlibiLogits = 2;   // ALiBi-biased (FwdParams::alibi_slopes is not null)

// The mask of a variant from its two flags (the launchers' with_flags arguments).
constexpr int logit_mods(bool capped, bool biased) {
  return (capped ? kCappedLogits : 0) | (biased ? kAlibiLogits : 0);
}

}  // namespace cm::sm90
