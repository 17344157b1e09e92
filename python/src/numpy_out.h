// Hands C++ vectors to Python as numpy arrays without copying: the array owns the vector.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <initializer_list>
#include <vector>

namespace cm::python {

template <class T>
nanobind::ndarray<nanobind::numpy, T> to_numpy(std::vector<T> values,
                                               std::initializer_list<size_t> shape) {
  auto* owned = new std::vector<T>(std::move(values));
  nanobind::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nanobind::ndarray<nanobind::numpy, T>(owned->data(), shape, owner);
}

}  // namespace cm::python
