// Run-time flags as template arguments, for the launchers that pick one of their kernels'
// compile-time variants (launch.cu for the forward, bwd_launch.cuh for the backward).
#pragma once

namespace cm::sm90 {

// f.template operator()<kChosen..., flags...>() with the run-time `flags` as template arguments:
// one instantiation for each combination.
template <bool... kChosen, class F>
auto with_flags(F&& f) {
  return f.template operator()<kChosen...>();
}
template <bool... kChosen, class F, class... Flags>
auto with_flags(F&& f, bool flag, Flags... flags) {
  return flag ? with_flags<kChosen..., true>(f, flags...)
              : with_flags<kChosen..., false>(f, flags...);
}

}  // namespace cm::sm90
