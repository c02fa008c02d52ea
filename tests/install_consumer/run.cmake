# ctest driver: installs the build tree BIN into BIN/install_consumer/prefix,
# configures and builds tests/install_consumer against it with find_package,
# and runs the consumer. Arguments: -DBIN= -DSRC= -DGEN= -DCXX= [-DCUDA_ROOT=].
set(prefix ${BIN}/install_consumer/prefix)
set(build ${BIN}/install_consumer/build)
file(REMOVE_RECURSE ${prefix} ${build})
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install consumer: step failed (${rc}): ${ARGN}")
  endif()
endfunction()
step(${CMAKE_COMMAND} --install ${BIN} --prefix ${prefix})
foreach(f lib/cmake/MetricNet/MetricNetConfig.cmake lib/cmake/MetricNet/MetricNetConfigVersion.cmake
          lib/libmn_data.a include/metricnet/data/image_io.h include/metricnet/runtime/tensor.h)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install consumer: ${prefix}/${f} was not installed")
  endif()
endforeach()
set(extra)
if(CUDA_ROOT)
  list(APPEND extra -DCUDAToolkit_ROOT=${CUDA_ROOT})
endif()
step(${CMAKE_COMMAND} -S ${SRC}/tests/install_consumer -B ${build} -G ${GEN}
     -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release ${extra})
step(${CMAKE_COMMAND} --build ${build})
step(${build}/consumer)
