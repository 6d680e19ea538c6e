# The sources of cpp/backend/amp/ (README.md beside this file says what each holds);
# included by the top CMakeLists.txt.
set(VDEV_BACKEND_AMP
  ${CMAKE_CURRENT_LIST_DIR}/autocast.cpp)
