# Tests of the static-file side of the HTTP layer (src/http: path, range, dates,
# MIME types, responses, file cache, static handler).
lepus_add_test(http_static_test
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/path_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/range_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/http_date_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/mime_types_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/autoindex_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/response_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/response_head_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/file_cache_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/static_handler_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/static_handler_functions_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/open_beneath_test.cc
  LIBS lepus_http)

lepus_add_test(http_static_threads_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/static_handler_threads_test.cc
  LIBS lepus_http
  LABELS tsan)
