# distributed.killed_rank_ends_all: rank 1 of a 2-rank run kills itself (SIGKILL) in
# the middle of a stream of all-reduces; rank 0 must not hang. Passes when mpirun
# ends with a failure status within LIMIT seconds and says which rank died.
# -DMPIRUN="mpirun;-np;2;..." -DBIN=<mn_tests_distributed> -DLIMIT=<seconds>
string(TIMESTAMP t0 "%s")
execute_process(COMMAND ${CMAKE_COMMAND} -E env MN_TEST_KILL_RANK=1 MN_NUM_THREADS=1 ${MPIRUN} ${BIN}
                        --gtest_filter=MpiFailure.KilledRankEndsEveryRank
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
string(TIMESTAMP t1 "%s")
math(EXPR secs "${t1} - ${t0}")
message("mpirun status: ${rc} after ${secs} s\n--- stdout (tail) ---")
string(LENGTH "${out}" n)
if(n GREATER 3000)
  math(EXPR start "${n} - 3000")
  string(SUBSTRING "${out}" ${start} 3000 out)
endif()
message("${out}\n--- stderr ---\n${err}")
if(rc STREQUAL "0")
  message(FATAL_ERROR "the run with a killed rank ended with status 0")
endif()
if(rc MATCHES "timeout|Process terminated due to timeout")
  message(FATAL_ERROR "the run with a killed rank hung (killed after 120 s)")
endif()
if(secs GREATER ${LIMIT})
  message(FATAL_ERROR "the other rank took ${secs} s to end (limit ${LIMIT} s)")
endif()
if(NOT "${out}${err}" MATCHES "signal 9|Killed|exited on signal|killed")
  message(FATAL_ERROR "mpirun did not say that a rank was killed")
endif()
message("ok: every rank ended ${secs} s after rank 1 was killed")
