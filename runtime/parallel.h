// CPU parallelism: one persistent pool of worker threads and parallel_for.
// The thread count is MN_NUM_THREADS from the environment, else the number of
// hardware threads; set_num_threads() changes it at run time. Nested calls run
// serially in the calling thread.
#pragma once
#include <cstdint>
#include <functional>

namespace mn {

int num_threads();
void set_num_threads(int n);

// Calls fn(begin_i, end_i) on disjoint chunks covering [begin, end), each chunk
// at least `grain` long (except the last), spread over the pool. Returns when all
// chunks are done; the first exception thrown by a chunk is rethrown here.
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);

}  // namespace mn
