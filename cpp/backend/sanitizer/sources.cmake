# The sources of cpp/backend/sanitizer/ (README.md beside this file says what each holds);
# included by the top CMakeLists.txt.
set(VDEV_BACKEND_SANITIZER
  ${CMAKE_CURRENT_LIST_DIR}/allocation_events.cpp
  ${CMAKE_CURRENT_LIST_DIR}/allocation_numbers.cpp
  ${CMAKE_CURRENT_LIST_DIR}/byte_runs.cpp
  ${CMAKE_CURRENT_LIST_DIR}/composite_scopes.cpp
  ${CMAKE_CURRENT_LIST_DIR}/findings.cpp
  ${CMAKE_CURRENT_LIST_DIR}/findings_file.cpp
  ${CMAKE_CURRENT_LIST_DIR}/host_operators.cpp
  ${CMAKE_CURRENT_LIST_DIR}/init_tracking.cpp
  ${CMAKE_CURRENT_LIST_DIR}/launch_checks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/poison.cpp
  ${CMAKE_CURRENT_LIST_DIR}/race_report.cpp
  ${CMAKE_CURRENT_LIST_DIR}/recorded_stack.cpp
  ${CMAKE_CURRENT_LIST_DIR}/settings.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shadow_memory.cpp
  ${CMAKE_CURRENT_LIST_DIR}/stream_sanitizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/switches.cpp)
