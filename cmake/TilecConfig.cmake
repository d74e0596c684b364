# In-tree entry point: -DTilec_DIR=<tilec checkout>/cmake. The package itself
# ships inside the Python package (src/tilec/cmake), where `tilec --cmake-dir` finds it.
include("${CMAKE_CURRENT_LIST_DIR}/../src/tilec/cmake/TilecConfig.cmake")
