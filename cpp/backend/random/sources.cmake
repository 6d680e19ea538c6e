# The sources of cpp/backend/random/ (README.md beside this file says what each holds);
# included by the top CMakeLists.txt.
set(VDEV_BACKEND_RANDOM
  ${CMAKE_CURRENT_LIST_DIR}/generator.cpp
  ${CMAKE_CURRENT_LIST_DIR}/graph_draws.cpp
  ${CMAKE_CURRENT_LIST_DIR}/keyed_engine.cpp)
