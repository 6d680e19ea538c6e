# The sources of cpp/backend/device/ (README.md beside this file says what each holds);
# included by the top CMakeLists.txt.
set(VDEV_BACKEND_DEVICE
  ${CMAKE_CURRENT_LIST_DIR}/autograd_drain.cpp
  ${CMAKE_CURRENT_LIST_DIR}/events.cpp
  ${CMAKE_CURRENT_LIST_DIR}/guard.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hooks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/init.cpp)
