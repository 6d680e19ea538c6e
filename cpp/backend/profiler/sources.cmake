# The sources of cpp/backend/profiler/ (README.md beside this file says what each holds);
# included by the top CMakeLists.txt.
set(VDEV_BACKEND_PROFILER
  ${CMAKE_CURRENT_LIST_DIR}/device_timeline.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kineto_plugin.cpp
  ${CMAKE_CURRENT_LIST_DIR}/legacy_stubs.cpp)
