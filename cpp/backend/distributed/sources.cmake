# The sources of cpp/backend/distributed/ (README.md beside this file says what each holds);
# included by the top CMakeLists.txt.
set(VDEV_BACKEND_DISTRIBUTED
  ${CMAKE_CURRENT_LIST_DIR}/collectives.cpp
  ${CMAKE_CURRENT_LIST_DIR}/comm_backend.cpp
  ${CMAKE_CURRENT_LIST_DIR}/comm_checks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/comm_work.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dist_fault.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rank_agreement.cpp
  ${CMAKE_CURRENT_LIST_DIR}/reducer_timer.cpp)
