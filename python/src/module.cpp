// compilemask._core: the framework-neutral core of the Python package. Python wraps it in
// compilemask/*.py; nothing here is meant to be called by users directly.
#include "bindings.h"

NB_MODULE(_core, m) {
  m.doc() = "CompileMask core bindings (use the compilemask package, not this module)";
  cm::python::bind_plan(m);
  cm::python::bind_mask(m);
  cm::python::bind_reference(m);
}
