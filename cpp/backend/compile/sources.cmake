# The sources of cpp/backend/compile/ (README.md beside this file says what each holds);
# included by the top CMakeLists.txt.
set(VDEV_BACKEND_COMPILE
  ${CMAKE_CURRENT_LIST_DIR}/kernel_launch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/launch_arguments.cpp)
