# The sources of cpp/backend/layouts/ (README.md beside this file says what each holds);
# included by the top CMakeLists.txt.
set(VDEV_BACKEND_LAYOUTS
  ${CMAKE_CURRENT_LIST_DIR}/layout_host_run.cpp
  ${CMAKE_CURRENT_LIST_DIR}/layout_views.cpp
  ${CMAKE_CURRENT_LIST_DIR}/queued_products.cpp
  ${CMAKE_CURRENT_LIST_DIR}/queued_quantized.cpp)
