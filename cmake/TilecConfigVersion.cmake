include("${CMAKE_CURRENT_LIST_DIR}/../src/tilec/cmake/TilecConfigVersion.cmake")
