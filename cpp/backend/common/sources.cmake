# The sources of cpp/backend/common/ (README.md beside this file says what each holds);
# included by the top CMakeLists.txt.
set(VDEV_BACKEND_COMMON
  ${CMAKE_CURRENT_LIST_DIR}/alert_filter.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu_alias.cpp
  ${CMAKE_CURRENT_LIST_DIR}/device_asserts.cpp
  ${CMAKE_CURRENT_LIST_DIR}/device_capability.cpp
  ${CMAKE_CURRENT_LIST_DIR}/error_boundary.cpp
  ${CMAKE_CURRENT_LIST_DIR}/json_text.cpp
  ${CMAKE_CURRENT_LIST_DIR}/launch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/operator_uses.cpp
  ${CMAKE_CURRENT_LIST_DIR}/optional_tensor_lists.cpp
  ${CMAKE_CURRENT_LIST_DIR}/schema_arguments.cpp
  ${CMAKE_CURRENT_LIST_DIR}/stand_in_trials.cpp
  ${CMAKE_CURRENT_LIST_DIR}/stream_lookup.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sync_debug.cpp
  ${CMAKE_CURRENT_LIST_DIR}/task.cpp
  ${CMAKE_CURRENT_LIST_DIR}/task_blocks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/thread_policy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/vdev_device.cpp
  ${CMAKE_CURRENT_LIST_DIR}/worker_warnings.cpp)
