# The sources of cpp/backend/memory/ (README.md beside this file says what each holds);
# included by the top CMakeLists.txt.
set(VDEV_BACKEND_MEMORY
  ${CMAKE_CURRENT_LIST_DIR}/allocator.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cache_history.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cache_stats.cpp
  ${CMAKE_CURRENT_LIST_DIR}/device_cache.cpp
  ${CMAKE_CURRENT_LIST_DIR}/device_tensor.cpp
  ${CMAKE_CURRENT_LIST_DIR}/host_allocator.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ipc_sharing.cpp
  ${CMAKE_CURRENT_LIST_DIR}/memory_history.cpp
  ${CMAKE_CURRENT_LIST_DIR}/retained_memory.cpp
  ${CMAKE_CURRENT_LIST_DIR}/storage_resize.cpp)
