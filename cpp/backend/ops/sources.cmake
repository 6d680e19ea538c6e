# The sources of cpp/backend/ops/ (README.md beside this file says what each holds);
# included by the top CMakeLists.txt.
set(VDEV_BACKEND_OPS
  ${CMAKE_CURRENT_LIST_DIR}/attention_choice.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conv.cpp
  ${CMAKE_CURRENT_LIST_DIR}/copy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dropout.cpp
  ${CMAKE_CURRENT_LIST_DIR}/factories.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fallback.cpp
  ${CMAKE_CURRENT_LIST_DIR}/layout_kernels.cpp
  ${CMAKE_CURRENT_LIST_DIR}/meta_kernels.cpp
  ${CMAKE_CURRENT_LIST_DIR}/nested_tensors.cpp
  ${CMAKE_CURRENT_LIST_DIR}/random_fills.cpp
  ${CMAKE_CURRENT_LIST_DIR}/resize.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rnn_cells.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shallow_copy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sparse_stubs.cpp
  ${CMAKE_CURRENT_LIST_DIR}/views.cpp)
