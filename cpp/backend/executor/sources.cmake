# The sources of cpp/backend/executor/ (README.md beside this file says what each holds);
# included by the top CMakeLists.txt.
set(VDEV_BACKEND_EXECUTOR
  ${CMAKE_CURRENT_LIST_DIR}/allocated_layouts.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu_shaped_returns.cpp
  ${CMAKE_CURRENT_LIST_DIR}/eligibility.cpp
  ${CMAKE_CURRENT_LIST_DIR}/enqueue.cpp
  ${CMAKE_CURRENT_LIST_DIR}/express.cpp
  ${CMAKE_CURRENT_LIST_DIR}/express_task.cpp
  ${CMAKE_CURRENT_LIST_DIR}/host_run.cpp
  ${CMAKE_CURRENT_LIST_DIR}/launch_plan.cpp
  ${CMAKE_CURRENT_LIST_DIR}/operator_task.cpp
  ${CMAKE_CURRENT_LIST_DIR}/out_kernel_layouts.cpp
  ${CMAKE_CURRENT_LIST_DIR}/out_variants.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plan_cache.cpp
  ${CMAKE_CURRENT_LIST_DIR}/size_hint.cpp)
