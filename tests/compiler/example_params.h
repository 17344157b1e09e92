// Test-only: parameter sets for the bundled examples at a given length, chosen so that every
// feature of each example is exercised (odd and empty segments, fully masked rows).
#pragma once

#include <compilemask/compilemask.h>

#include <string>
#include <utility>
#include <vector>

namespace cm::testing {

struct ExampleCase {
  std::string example;  // file stem in examples/
  Params params;
  Dims dims;
};

// Several cases per example at query length n (and key length derived per example).
std::vector<ExampleCase> example_cases(int64_t n);

// The source text of examples/NAME.mask.
std::string example_source(const std::string& name);

}  // namespace cm::testing
