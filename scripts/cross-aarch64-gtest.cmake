# Included via CMAKE_PROJECT_pocket_INCLUDE by cross-aarch64.sh: builds GoogleTest
# from Debian's sources for the target. Debian's GoogleTest (>= 1.12) already
# defines the GTest::gtest / GTest::gtest_main aliases that CMakeLists.txt
# would add again, so the script sets GTest_FOUND to skip that block.
add_subdirectory(/usr/src/googletest ${CMAKE_BINARY_DIR}/googletest EXCLUDE_FROM_ALL)
