// The JSON form of a plan that `compile --emit json` and `inspect --emit json` print.
#pragma once

#include <compilemask/compilemask.h>

#include <string>

namespace cm::cli {

// {"stats": ..., [extra fields,] "descriptor": ...}: the stats and the whole descriptor
// (descriptor_to_json), with `extra` (`,\n"name": value` pairs, or empty) between them.
std::string plan_json(const Plan& plan, const std::string& extra = "");

}  // namespace cm::cli
