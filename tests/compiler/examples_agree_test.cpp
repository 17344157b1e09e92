// Every bundled example, at odd lengths and several tilings, agrees exactly with the
// brute-force evaluation of its program through every production path.
#include "agreement.h"
#include "example_params.h"

#include <gtest/gtest.h>

namespace cm::testing {
namespace {

TEST(ExamplesAgree, WithBruteForceAtOddLengthsAndTilings) {
  const Tiling tilings[] = {{16, 16}, {128, 128}, {64, 32}, {48, 80}};
  for (int64_t n : {1, 17, 113, 300}) {
    for (const ExampleCase& c : example_cases(n)) {
      CompileResult compiled = compile(example_source(c.example), c.example + ".mask");
      ASSERT_TRUE(compiled) << c.example << ": "
                            << (compiled.diagnostics.empty() ? ""
                                                             : compiled.diagnostics[0].format());
      for (const Tiling& t : tilings) {
        EXPECT_EQ(disagreement(*compiled.mask, c.params, c.dims, t), "")
            << c.example << " n=" << n << " tile " << t.m << "x" << t.n;
      }
    }
  }
}

}  // namespace
}  // namespace cm::testing
