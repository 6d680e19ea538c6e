# The sources of cpp/backend/checks/ (README.md beside this file says what each holds);
# included by the top CMakeLists.txt.
set(VDEV_BACKEND_CHECKS
  ${CMAKE_CURRENT_LIST_DIR}/call_checks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/capability_rules.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conv_stand_ins.cpp
  ${CMAKE_CURRENT_LIST_DIR}/device_rules.cpp
  ${CMAKE_CURRENT_LIST_DIR}/empty_inputs.cpp
  ${CMAKE_CURRENT_LIST_DIR}/host_checked_results.cpp
  ${CMAKE_CURRENT_LIST_DIR}/index_masks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/missing_cuda_kernels.cpp
  ${CMAKE_CURRENT_LIST_DIR}/nondeterministic_alerts.cpp
  ${CMAKE_CURRENT_LIST_DIR}/overlap.cpp
  ${CMAKE_CURRENT_LIST_DIR}/stand_in_check.cpp)
