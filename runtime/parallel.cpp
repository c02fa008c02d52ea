// A persistent pool of worker threads behind parallel_for. Chunks are handed
// out through an atomic counter; the calling thread works too. Nested calls
// (from inside a chunk) run serially so they cannot deadlock the pool.
#include "runtime/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mn {
namespace {

thread_local bool t_in_parallel = false;

int default_threads() {
  if (const char* v = std::getenv("MN_NUM_THREADS")) {
    int n = std::atoi(v);
    if (n > 0) return n;
  }
  unsigned h = std::thread::hardware_concurrency();
  return h ? static_cast<int>(h) : 1;
}

class Pool {
 public:
  explicit Pool(int n) { resize(n); }
  ~Pool() { stop(); }

  int size() const { return nthreads_; }

  void resize(int n) {
    stop();
    nthreads_ = std::max(1, n);
    stopping_ = false;
    for (int i = 1; i < nthreads_; ++i) workers_.emplace_back([this] { loop(); });
  }

  void run(int64_t nchunks, const std::function<void(int64_t)>& chunk) {
    std::unique_lock<std::mutex> run_lock(run_mu_);  // one parallel region at a time
    {
      std::lock_guard<std::mutex> lk(mu_);
      job_ = &chunk;
      njobs_ = nchunks;
      next_.store(0);
      done_ = 0;
      error_ = nullptr;
      generation_++;
    }
    cv_.notify_all();
    work(&chunk, nchunks);
    std::unique_lock<std::mutex> lk(mu_);
    // Wait for every chunk AND for every worker that joined this generation to
    // leave work(): a worker still inside work() when the next generation resets
    // next_ could otherwise take (and run twice) a chunk of the new job, and a
    // chunk still running after run() returns would use a dead stack frame.
    done_cv_.wait(lk, [&] { return done_ == njobs_ && active_ == 0; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // Runs chunks of `job` (njobs of them) until the shared counter runs out.
  // The job and its size are passed in (read under mu_ by the workers), never
  // re-read from the members, which the next generation overwrites.
  void work(const std::function<void(int64_t)>* job, int64_t njobs) {
    const bool prev = t_in_parallel;
    t_in_parallel = true;
    for (;;) {
      int64_t i = next_.fetch_add(1);
      if (i >= njobs) break;
      try {
        (*job)(i);
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu_);
        if (!error_) error_ = std::current_exception();
      }
      std::lock_guard<std::mutex> lk(mu_);
      if (++done_ == njobs_) done_cv_.notify_all();
    }
    t_in_parallel = prev;
  }

  void loop() {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int64_t)>* job;
      int64_t njobs;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stopping_ || (generation_ != seen && job_ != nullptr); });
        if (stopping_) return;
        seen = generation_;
        job = job_;
        njobs = njobs_;
        ++active_;  // run() cannot finish (nor start the next job) until we leave
      }
      work(job, njobs);
      std::lock_guard<std::mutex> lk(mu_);
      if (--active_ == 0) done_cv_.notify_all();
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  int nthreads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex mu_, run_mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int64_t)>* job_ = nullptr;
  int64_t njobs_ = 0;
  std::atomic<int64_t> next_{0};
  int64_t done_ = 0;
  int active_ = 0;  // workers inside work() for the current generation
  uint64_t generation_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
};

Pool& pool() {
  static Pool* p = new Pool(default_threads());  // leaked: workers may outlive static destructors
  return *p;
}

}  // namespace

int num_threads() { return pool().size(); }

void set_num_threads(int n) {
  if (n != pool().size()) pool().resize(n);
}

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (end <= begin) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t n = end - begin;
  int nt = num_threads();
  if (t_in_parallel || nt == 1 || n <= grain) {
    fn(begin, end);
    return;
  }
  int64_t nchunks = std::min<int64_t>((n + grain - 1) / grain, int64_t(nt) * 4);
  int64_t chunk = (n + nchunks - 1) / nchunks;
  nchunks = (n + chunk - 1) / chunk;
  pool().run(nchunks, [&](int64_t c) {
    int64_t b = begin + c * chunk;
    fn(b, std::min(end, b + chunk));
  });
}

}  // namespace mn
