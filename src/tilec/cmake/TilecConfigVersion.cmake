# The version of the tilec package this CMake package ships with (kept equal
# to tilec.__version__ by tests/test_build_integration.py). Same major version
# and at least the requested version is compatible.
set(PACKAGE_VERSION "0.1.0")
if(PACKAGE_FIND_VERSION)
  string(REGEX MATCH "^[0-9]+" _tilec_major "${PACKAGE_VERSION}")
  if(PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION OR NOT PACKAGE_FIND_VERSION_MAJOR EQUAL _tilec_major)
    set(PACKAGE_VERSION_COMPATIBLE FALSE)
  else()
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
    if(PACKAGE_VERSION VERSION_EQUAL PACKAGE_FIND_VERSION)
      set(PACKAGE_VERSION_EXACT TRUE)
    endif()
  endif()
  unset(_tilec_major)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()
