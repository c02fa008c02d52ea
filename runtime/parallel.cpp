// A persistent pool of worker threads behind parallel_for. Chunks are handed
// out through an atomic counter; the calling thread works too. Nested calls
// (from inside a chunk) run serially so they cannot deadlock the pool.
//
// Hand-off cost: a region used to take a mutex, a condition-variable wake-up and
// a wait per region plus a lock per chunk, more than many kernels it
// parallelised (issue 20: a loss at batch 150 x 128 took 20 us on one thread and
// 55-93 us on two). Now a region is published through an atomic generation
// counter (a seqlock: odd while the job is being written); idle workers spin on
// it for a short while (kSpinNs) before sleeping on a condition variable, so
// back-to-back regions (a training step) reach spinning workers in well under
// a microsecond, and chunks are counted with atomics, not a lock. The mutex is
// taken only to wake sleeping workers and to record an exception.
#include "runtime/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MN_CPU_RELAX() _mm_pause()
#else
#define MN_CPU_RELAX() std::this_thread::yield()
#endif

namespace mn {
namespace {

thread_local bool t_in_parallel = false;

// How long an idle worker spins for the next region before it sleeps. Long
// enough to bridge the serial code between the kernels of one training step,
// short enough not to steal much from other processes on a shared machine.
constexpr auto kSpinNs = std::chrono::nanoseconds(100000);

int default_threads() {
  if (const char* v = std::getenv("MN_NUM_THREADS")) {
    int n = std::atoi(v);
    if (n > 0) return n;
  }
  unsigned h = std::thread::hardware_concurrency();
  return h ? static_cast<int>(h) : 1;
}

using Job = std::function<void(int64_t)>;

class Pool {
 public:
  explicit Pool(int n) { resize(n); }
  ~Pool() { stop(); }

  int size() const { return nthreads_; }

  void resize(int n) {
    stop();
    nthreads_ = std::max(1, n);
    stopping_.store(false);
    // The generation is read here, before the threads start: a worker that reads it
    // itself may start after the first run() has published its job and then wait
    // for the next one, leaving that whole region to the caller (pair_selection's
    // study, a single region, ran on one core).
    const uint64_t start = gen_.load() & ~uint64_t(1);
    for (int i = 1; i < nthreads_; ++i) workers_.emplace_back([this, start] { loop(start); });
  }

  void run(int64_t nchunks, const Job& chunk) {
    std::lock_guard<std::mutex> run_lock(run_mu_);  // one region at a time (uncontended)
    // Publish the job: generation odd while the fields change, even when ready.
    gen_.fetch_add(1);
    job_.store(&chunk);
    njobs_.store(nchunks);
    next_.store(0);
    done_.store(0);
    error_ = nullptr;
    gen_.fetch_add(1);
    if (sleepers_.load() > 0) {
      std::lock_guard<std::mutex> lk(mu_);
      cv_.notify_all();
    }
    work(&chunk, nchunks);
    // Wait for every chunk, then for every worker that joined this generation to
    // leave work(): a worker still inside work() when the next generation resets
    // next_ could otherwise take (and run twice) a chunk of the new job, and a
    // chunk still running after run() returns would use a dead stack frame.
    wait_until([&] { return done_.load() == nchunks; });
    job_.store(nullptr);  // late joiners see no job (before reading active_)
    wait_until([&] { return active_.load() == 0; });
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // The caller spins (it has nothing else to do), yielding now and then so a
  // descheduled worker on an oversubscribed machine gets the core back.
  template <typename Pred>
  static void wait_until(Pred done) {
    for (int spins = 0; !done(); ++spins) {
      if (spins < 4096)
        MN_CPU_RELAX();
      else
        std::this_thread::yield();
    }
  }

  // Runs chunks of `job` (njobs of them) until the shared counter runs out.
  void work(const Job* job, int64_t njobs) {
    const bool prev = t_in_parallel;
    t_in_parallel = true;
    for (;;) {
      const int64_t i = next_.fetch_add(1);
      if (i >= njobs) break;
      try {
        (*job)(i);
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu_);
        if (!error_) error_ = std::current_exception();
      }
      done_.fetch_add(1);
    }
    t_in_parallel = prev;
  }

  // Waits (spin, then sleep) until the generation differs from `seen` and is
  // even (a job is ready) or the pool stops; returns that generation.
  uint64_t wait_for_job(uint64_t seen) {
    const auto spin_end = std::chrono::steady_clock::now() + kSpinNs;
    for (int spins = 0;; ++spins) {
      const uint64_t g = gen_.load();
      if (stopping_.load()) return g;
      if (g != seen && (g & 1) == 0) return g;
      MN_CPU_RELAX();
      if ((spins & 255) == 255 && std::chrono::steady_clock::now() > spin_end) break;
    }
    std::unique_lock<std::mutex> lk(mu_);
    sleepers_.fetch_add(1);
    uint64_t g = 0;
    cv_.wait(lk, [&] {
      g = gen_.load();
      return stopping_.load() || (g != seen && (g & 1) == 0);
    });
    sleepers_.fetch_sub(1);
    return g;
  }

  void loop(uint64_t seen) {
    for (;;) {
      const uint64_t g = wait_for_job(seen);
      if (stopping_.load()) return;
      seen = g;
      // Join generation g: announce ourselves first, then check that g is still
      // the published job (seqlock re-read), so run() cannot return while we
      // use its job, and we never mix the fields of two generations.
      active_.fetch_add(1);
      const Job* job = job_.load();
      const int64_t njobs = njobs_.load();
      if (job != nullptr && gen_.load() == g) work(job, njobs);
      active_.fetch_sub(1);
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stopping_.store(true);
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  int nthreads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex mu_, run_mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> gen_{0};  // seqlock over job_ / njobs_: odd while written
  std::atomic<const Job*> job_{nullptr};
  std::atomic<int64_t> njobs_{0};
  std::atomic<int64_t> next_{0};
  std::atomic<int64_t> done_{0};
  std::atomic<int> active_{0};    // workers inside a generation (see run())
  std::atomic<int> sleepers_{0};  // workers blocked on cv_
  std::atomic<bool> stopping_{false};
  std::exception_ptr error_;      // first exception of the region (under mu_)
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
