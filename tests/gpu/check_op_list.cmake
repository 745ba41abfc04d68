# check_op_list.cmake: the ctest list of GPU op tests (tests/CMakeLists.txt, EXPECTED, comma-separated) must
# name exactly the op tests the binary has (BINARY --list, one per line; runs without a GPU).
execute_process(COMMAND ${BINARY} --list OUTPUT_VARIABLE listed RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${BINARY} --list exited ${rc}")
endif()
string(STRIP "${listed}" listed)
string(REPLACE "\n" "," listed "${listed}")
if(NOT listed STREQUAL EXPECTED)
  message(FATAL_ERROR "tests/CMakeLists.txt lists GPU op tests '${EXPECTED}' but test_gpu_ops --list gives "
                      "'${listed}': keep _gpu_op_tests in step with op_tests() in tests/gpu/op_tests.cpp")
endif()
message(STATUS "GPU op test list in step: ${listed}")
