# Imported targets for the parts of libtorch we link: vdev::torch_cpu and vdev::c10 (the backend),
# vdev::torch_python (the bindings only: Python objects for ATen's generators).
#
# Why not find_package(Torch): under build isolation scikit-build-core's prefix path can mix the
# target environment's torch with the build environment's Caffe2 config, TorchConfig no longer sets
# the C++ ABI define, and caffe2::mkl leaks bogus link directories. Two libraries and one include
# tree are all we need, so we describe them ourselves. torch is located without importing it
# (importing it costs seconds and would autoload an installed torch_vdev).

execute_process(
  COMMAND "${Python_EXECUTABLE}" -c
          "import importlib.util as u; s = u.find_spec('torch'); print(s.submodule_search_locations[0] if s else '')"
  OUTPUT_VARIABLE VDEV_TORCH_DIR
  OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE _vdev_torch_rc)
if(NOT _vdev_torch_rc EQUAL 0 OR VDEV_TORCH_DIR STREQUAL "")
  message(FATAL_ERROR "torch_vdev: torch is not installed for ${Python_EXECUTABLE}; install a supported torch first (python/torch_vdev/_compat/releases.py)")
endif()
message(STATUS "torch_vdev: using torch at ${VDEV_TORCH_DIR}")

foreach(_lib torch_cpu c10 torch_python)
  set(_path "${VDEV_TORCH_DIR}/lib/lib${_lib}.so")
  if(NOT EXISTS "${_path}")
    message(FATAL_ERROR "torch_vdev: ${_path} not found")
  endif()
  add_library(vdev::${_lib} SHARED IMPORTED)
  set_target_properties(vdev::${_lib} PROPERTIES IMPORTED_LOCATION "${_path}")
endforeach()

set_target_properties(vdev::c10 PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${VDEV_TORCH_DIR}/include"
  # The torch 2.13 wheels are built with the new libstdc++ ABI; a mismatch shows at import time as
  # an undefined symbol such as _ZN3c106DeviceC1ERKSs.
  INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=1")
set_target_properties(vdev::torch_cpu PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${VDEV_TORCH_DIR}/include;${VDEV_TORCH_DIR}/include/torch/csrc/api/include"
  INTERFACE_LINK_LIBRARIES vdev::c10)
set_target_properties(vdev::torch_python PROPERTIES INTERFACE_LINK_LIBRARIES vdev::torch_cpu)

# The torch release this build is for (torch/version.py's __version__, e.g. 2.14.1+cu130), read
# without importing torch: written into torch_vdev/_build_info.py, which the import-time check
# (python/torch_vdev/_compat/__init__.py) compares with the torch that loads the wheel.
file(STRINGS "${VDEV_TORCH_DIR}/version.py" _vdev_torch_version_line REGEX "^__version__ = ")
string(REGEX REPLACE "^__version__ = ['\"]([^'\"]+)['\"].*$" "\\1" VDEV_TORCH_VERSION "${_vdev_torch_version_line}")
if(VDEV_TORCH_VERSION STREQUAL "" OR VDEV_TORCH_VERSION STREQUAL _vdev_torch_version_line)
  message(FATAL_ERROR "torch_vdev: no __version__ in ${VDEV_TORCH_DIR}/version.py")
endif()
message(STATUS "torch_vdev: building against torch ${VDEV_TORCH_VERSION}")
