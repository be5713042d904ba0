# Builds and installs qnum into a scratch prefix, then builds consumers of qnum::qnum (header
# only) and qnum::kernels (compiled) with find_package(qnum).
file(REMOVE_RECURSE ${WORK_DIR})
set(build ${WORK_DIR}/qnum-build)
set(prefix ${WORK_DIR}/prefix)
set(consumer ${WORK_DIR}/consumer-build)
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
endfunction()
run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${build} -G ${GENERATOR} -DQNUM_BUILD_TESTS=OFF
    -DQNUM_BUILD_APPS=OFF -DQNUM_BUILD_BENCH=OFF -DQNUM_WITH_CUDA=OFF -DCMAKE_INSTALL_PREFIX=${prefix})
run(${CMAKE_COMMAND} --build ${build})  # the compiled part: qnum::kernels
run(${CMAKE_COMMAND} --install ${build})
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer -B ${consumer} -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${prefix})
run(${CMAKE_COMMAND} --build ${consumer})
run(${consumer}/qnum_consumer)
run(${consumer}/qnum_consumer_dispatch)
message(STATUS "consumer built and ran against ${prefix}")
