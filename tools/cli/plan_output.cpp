// The JSON form of a plan (plan_output.h).
#include "plan_output.h"

#include "descriptor/decode.h"

namespace cm::cli {

std::string plan_json(const Plan& plan, const std::string& extra) {
  return "{\"stats\": " + plan.stats().to_json() + extra +
         ",\n\"descriptor\": " + descriptor_to_json(plan.blob()) + "}\n";
}

}  // namespace cm::cli
