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
    work();
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [&] { return done_ == njobs_; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void work() {
    t_in_parallel = true;
    for (;;) {
      int64_t i = next_.fetch_add(1);
      if (i >= njobs_) break;
      try {
        (*job_)(i);
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu_);
        if (!error_) error_ = std::current_exception();
      }
      std::lock_guard<std::mutex> lk(mu_);
      if (++done_ == njobs_) done_cv_.notify_all();
    }
    t_in_parallel = false;
  }

  void loop() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stopping_ || (generation_ != seen && job_ != nullptr); });
        if (stopping_) return;
        seen = generation_;
      }
      work();
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
