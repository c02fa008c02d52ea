# mn_local_gpu_architectures(OUT): the CUDA architectures of the GPUs nvidia-smi lists on this
# machine ("90" for an H100/H200, "80" for an A100; each once), or an empty list when there is
# no nvidia-smi, no driver or no GPU. MN_LOCAL_GPU_CAPS ("9.0;8.0") stands in for nvidia-smi's
# answer (tests, and machines where the build runs in a container without the driver).
function(mn_local_gpu_architectures out)
  if(DEFINED MN_LOCAL_GPU_CAPS)
    set(caps "${MN_LOCAL_GPU_CAPS}")
  else()
    find_program(_mn_nvidia_smi nvidia-smi)
    set(caps "")
    if(_mn_nvidia_smi)
      execute_process(COMMAND ${_mn_nvidia_smi} --query-gpu=compute_cap --format=csv,noheader
                      OUTPUT_VARIABLE caps RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
      if(NOT rc EQUAL 0)
        set(caps "")
      endif()
      string(REPLACE "\n" ";" caps "${caps}")
    endif()
  endif()
  set(archs "")
  foreach(cap IN LISTS caps)
    string(STRIP "${cap}" cap)
    if(cap MATCHES "^([0-9]+)\\.([0-9]+)$")
      list(APPEND archs "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES archs)
  set(${out} "${archs}" PARENT_SCOPE)
endfunction()
