// Turns `-p NAME=VALUE` arguments into cm::Params, using the mask's declared parameter types.
//
//   int       -p W=4096
//   int[]     -p ctx=32,32,16
//   segments  -p docs=0,100,250,512       boundaries: [0,100) [100,250) [250,512)
//             -p docs=len:100,150,262     lengths, consecutive from 0
//             -p docs=0:100,120:250       explicit start:end pairs
//   segment   -p prompt=0:128
//   any       -p NAME=@FILE               the value is read from FILE (whitespace or commas
//                                         separate items)
#pragma once

#include <compilemask/compilemask.h>

#include <string>
#include <vector>

namespace cm::cli {

// Preconditions: `assignments` are the raw -p values ("NAME=VALUE").
// Postconditions: every returned entry names a declared parameter and has the value kind of its
// type; segment lists are sorted and non-overlapping. Throws UsageError for an argument without
// '=' and InputError (naming the parameter and the rule) for an undeclared name, a repeated
// name or a malformed value. Missing parameters are left for Mask::specialize to report.
Params parse_params(const std::vector<std::string>& assignments,
                    const std::vector<ParamInfo>& declared, const std::string& mask_name);

// The declarations as the program writes them, comma-separated: "W: int >= 1, docs: segments".
std::string declared_list(const std::vector<ParamInfo>& declared);

}  // namespace cm::cli
