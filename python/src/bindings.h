// The parts of the compilemask._core module, one registration function per source file.
#pragma once

#include <nanobind/nanobind.h>

namespace cm::python {

void bind_mask(nanobind::module_& m);       // compile, Mask, specialize (bind_mask.cpp)
void bind_plan(nanobind::module_& m);       // Plan and its inspection (bind_plan.cpp)
void bind_reference(nanobind::module_& m);  // the CPU reference attention (bind_reference.cpp)

}  // namespace cm::python
