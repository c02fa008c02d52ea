// The study harness's front half (see harness.h): flags, the resume contract,
// device and presets, --evaluate, summary.json and report.md, and main()'s
// error handling. The epoch loop and the stop control are in harness_loop.cpp.
#include "experiments/common/harness.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "experiments/common/harness_internal.h"
#include "experiments/common/provenance.h"
#include "kernels/gemm_config.h"
#include "nn/module.h"
#include "runtime/determinism.h"
#include "runtime/parallel.h"
#include "runtime/error.h"

namespace mn::exp {

// Changing these on --resume changes how long or where the run goes on, not what
// it computes: --epochs (restored when not given), the stop flags and the device
// of this invocation, the out dir being resumed, and where the data and its
// packed cache live (they must hold the same data).
const std::vector<std::string> kResumeMayChange = {"epochs",   "time-limit", "stop-after", "device",   "log-every",
                                                   "cuda-graph", "precision", "out-dir",  "resume", "data-dir",
                                                   "cache-dir"};

namespace {
// Flags of one invocation: never restored from a checkpoint.
const char* kPerInvocation[] = {"time-limit", "stop-after", "device",        "out-dir",
                                 "resume",     "evaluate",   "export-weights"};

bool is_per_invocation(const std::string& k) {
  return std::find(std::begin(kPerInvocation), std::end(kPerInvocation), k) != std::end(kPerInvocation);
}

// A usage error: exit status 2 (a bad flag, not a failed run). Made from an
// mn::Error it keeps that error's check and source location for MN_DEBUG_ERRORS.
struct UsageError : Error {
  explicit UsageError(const std::string& msg) : Error(msg, __FILE__, __LINE__) {}
  explicit UsageError(const Error& e) : Error(e) {}
};

void declare_harness_flags(Flags& f, const Study& st) {
  f.add_string("device", "auto", "auto (a GPU when there is one), cpu, cuda or cuda:N");
  f.add_string("out-dir", st.default_out_dir(), "where config.txt, metrics.jsonl, checkpoints, plots, "
               "summary.json and report.md go");
  f.add_int("seed", 1, "seed of initialisation, sampling and dropout", 0);
  f.add_bool("resume", false, "continue the run in --out-dir from last.safetensors (also from a mid-epoch "
             "stop) with its stored configuration; only --epochs, --time-limit, --stop-after, --device, --log-every, "
             "--out-dir, --data-dir and --cache-dir may differ");
  f.add_double("time-limit", 0, "stop resumably before this many seconds of wall time have passed (0: none); "
               "the progress is saved and --resume continues exactly. Exit status 3", 0, 1e9);
  f.add_int("stop-after", 0, "stop resumably after this many training steps in this run (0: none); exit status 3",
            0);
  if (st.epoch_shaped()) f.add_int("epochs", st.default_epochs(), "training epochs", 1, 1000000);
  if (st.epoch_shaped())
    f.add_bool("cuda-graph", true, "GPU: capture the training step as a CUDA graph once and replay it, where the "
               "study's step allows (summary.json's cuda_graph says why not); --no-cuda-graph runs it eagerly");
  if (st.epoch_shaped())
    f.add_int("log-every", 0, "training steps between reads of the step statistics (progress line, NaN check) "
              "to the host; 0: every step on the CPU, every 50 on a GPU, where each read waits for the device",
              0, 1000000);
  if (st.can_evaluate()) f.add_string("evaluate", "", "only evaluate this checkpoint (written by this study)");
  if (st.can_evaluate())
    f.add_string("export-weights", "", "with --evaluate CKPT: write CKPT's model parameters and buffers (same names, "
                 "no optimizer state; metadata study and config kept) to this *.safetensors file and exit, running "
                 "nothing else (docs/checkpoints.md; tools/load_in_torch.py loads either file in PyTorch)");
  f.add_string("precision", "auto",
               "products of the convolutions and dense layers: auto (tf32 on a GPU, fp32 on the CPU; MN_PRECISION "
               "in the environment sets it for GPU runs), fp32, tf32 (GPU tensor cores, inputs rounded to a 10-bit "
               "mantissa: PyTorch's allow_tf32), bf16 (GPU tensor cores, inputs rounded to bfloat16, FP32 "
               "accumulation: PyTorch's autocast(bfloat16)). Weights, activations, optimizer state and checkpoints "
               "stay FP32; distances, miners and losses always run in FP32");
  f.add_string("tf32", "", "the older spelling of --precision, kept for configs and checkpoints written before it: "
               "conv (TF32 convolutions, FP32 dense layers), all (= --precision tf32), off (= --precision fp32)");
  f.add_bool("deterministic", false, "GPU: refuse the ops whose CUDA kernels add with float atomics (index_add, "
             "scatter_add, the gradient of losses over mined tuples, gradient clipping), so two runs from one "
             "seed give identical weights (runtime/determinism.h); also MN_DETERMINISTIC=1");
}

// --tf32's value as one of conv, all, off (true / false: the boolean flag of
// earlier versions, in configs and checkpoints, read as all / off).
std::string tf32_mode(const std::string& v) {
  if (v == "conv" || v == "all" || v == "off") return v;
  if (v == "true") return "all";
  if (v == "false") return "off";
  throw UsageError("--tf32 " + v + ": expected conv, all or off (or use --precision fp32|tf32|bf16)");
}

// The precisions of this run from --precision (or the legacy --tf32) and the device.
struct PrecisionChoice {
  kernels::Precision conv = kernels::Precision::FP32, matmul = kernels::Precision::FP32;
};
PrecisionChoice choose_precision(const Flags& f, const Device& device) {
  using kernels::Precision;
  const std::string p = f.str("precision"), legacy = f.str("tf32");
  if (p != "auto") {
    Precision v = Precision::FP32;
    if (!kernels::parse_precision(p.c_str(), &v))
      throw UsageError("--precision " + p + ": expected auto, fp32, tf32 or bf16");
    if (!legacy.empty())
      throw UsageError("--precision " + p + " and --tf32 " + legacy + " both given: --tf32 is the older spelling of "
                       "--precision; keep one");
    if (v != Precision::FP32 && !device.is_cuda())
      throw UsageError("--precision " + p + ": TF32 and BF16 are the GPU tensor cores' input formats and this run is "
                       "on the CPU (" + device_name(device) + "); use --precision fp32 or auto");
    return {v, v};
  }
  if (!device.is_cuda()) {
    if (!legacy.empty()) (void)tf32_mode(legacy);  // validated; the CPU always computes in FP32
    return {};
  }
  if (!legacy.empty()) {
    const std::string m = tf32_mode(legacy);
    return {m == "off" ? Precision::FP32 : Precision::TF32, m == "all" ? Precision::TF32 : Precision::FP32};
  }
  if (const char* e = std::getenv("MN_PRECISION"); e != nullptr && *e != '\0') {
    Precision v = Precision::FP32;
    if (!kernels::parse_precision(e, &v)) throw UsageError(std::string("MN_PRECISION=") + e + ": expected fp32, tf32 or bf16");
    return {v, v};
  }
  return {Precision::TF32, Precision::TF32};
}

std::string precision_words(const PrecisionChoice& c) {
  using kernels::Precision;
  auto words = [](Precision p) {
    return p == Precision::TF32 ? std::string("TF32 tensor cores") : p == Precision::BF16 ? std::string("BF16 tensor cores")
                                                                                          : std::string("FP32");
  };
  if (c.conv == c.matmul) return std::string("precision ") + kernels::precision_name(c.conv) + ": " + words(c.conv) +
                                 " for convolutions and dense layers";
  return std::string("precision: ") + words(c.conv) + " for convolutions, " + words(c.matmul) + " for dense layers";
}

// The stored value as flag text (what a config file would hold).
std::string stored_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number()) return v.dump();
  return v.dump();  // set() rejects it, naming the key
}

std::string source_name(Flags::Origin o) {
  return o == Flags::Origin::Config ? "the --config file" : "the command line";
}

// The resume contract (harness.h): restore the stored configuration, refuse a
// given flag that differs from it (except the ones allowed to change).
void apply_resume_contract(Flags& f, const Study& st, const std::string& ckpt) {
  nn::Metadata md = nn::read_safetensors_metadata(ckpt);
  const std::string& who = md_string(md, "study", ckpt);
  if (who != st.name())
    throw UsageError("--resume: '" + ckpt + "' was written by " + who + ", not " + st.name() +
                     "; resume it with " + who + " or choose another --out-dir");
  Json cfg = Json::parse(md_string(md, "config", ckpt), nullptr, false);
  if (cfg.is_discarded() || !cfg.is_object())
    MN_THROW("--resume: '", ckpt, "': metadata 'config' is not a JSON object of flags");
  std::vector<std::string> may = kResumeMayChange;
  for (auto& k : st.resume_may_change()) may.push_back(k);
  for (auto it = cfg.begin(); it != cfg.end(); ++it) {
    const std::string& k = it.key();
    if (!f.declared(k)) {
      std::fprintf(stderr, "warning: --resume: '%s' stores flag '%s', which this binary no longer has; ignored\n",
                   ckpt.c_str(), k.c_str());
      continue;
    }
    if (is_per_invocation(k)) continue;
    const bool given = f.user_set(k);
    const Flags::Origin o = f.origin(k);
    const std::string mine = f.text(k);
    f.set(k, stored_text(it.value()), Flags::Origin::Checkpoint, "--resume: '" + ckpt + "' metadata config." + k);
    if (!given || f.text(k) == mine) continue;
    const std::string theirs = f.text(k);
    if (std::find(may.begin(), may.end(), k) != may.end()) {
      f.set(k, mine, o, source_name(o));
      continue;
    }
    throw UsageError("--resume: --" + k + " is " + mine + " on " + source_name(o) + " but the run in '" + ckpt +
                     "' used " + theirs + "; a resumed run keeps its configuration (only --epochs, --time-limit, "
                     "--stop-after, --device, --log-every, --out-dir, --data-dir, --cache-dir may change): drop --" + k +
                     " or start a new run in another --out-dir");
  }
}

// --evaluate: the checkpoint must come from this study; its architecture and
// evaluation flags are restored (a flag given again wins).
void apply_evaluate_checkpoint(Flags& f, const Study& st, const std::string& ckpt) {
  check_regular_file(ckpt, "--evaluate");
  nn::Metadata md = nn::read_safetensors_metadata(ckpt);
  const std::string& who = md_string(md, "study", ckpt);
  if (who != st.name())
    throw UsageError("--evaluate: '" + ckpt + "' is a checkpoint of " + who + ", not of " + st.name() +
                     " (a different network): evaluate it with " + who);
  Json cfg = Json::parse(md_string(md, "config", ckpt), nullptr, false);
  if (cfg.is_discarded() || !cfg.is_object())
    MN_THROW("--evaluate: '", ckpt, "': metadata 'config' is not a JSON object of flags");
  std::vector<std::string> keys = st.architecture_keys();
  for (const auto& k : st.evaluation_keys()) keys.push_back(k);
  for (const auto& k : keys) {
    auto it = cfg.find(k);
    if (it == cfg.end() || f.user_set(k)) continue;
    f.set(k, stored_text(*it), Flags::Origin::Checkpoint, "--evaluate: '" + ckpt + "' metadata config." + k);
  }
}

Device choose_device(const Flags& f) {
  const std::string ds = f.str("device");
  Device device;
  try {
    device = ds == "auto" ? (cuda_available() ? Device::cuda(0) : Device::cpu()) : parse_device(ds);
  } catch (const Error& e) {
    throw UsageError(std::string("--device ") + ds + ": " + e.message() + " (use auto, cpu, cuda or cuda:N)");
  }
  if (device.is_cuda())
    MN_CHECK(cuda_available(), "--device ", ds, ": no CUDA device is available (",
             cuda_compiled() ? "no GPU or driver found" : "this build has no CUDA", ")");
  return device;
}

int evaluate_only(Study& st, Context& ctx) {
  const std::string ckpt = ctx.flags().str("evaluate");
  st.setup(ctx);
  check_architecture_matches(st, ctx.flags(), ckpt, "--evaluate");
  nn::load_checkpoint(ckpt, st.model(), nullptr);
  std::printf("evaluating %s on %s\n", ckpt.c_str(), device_name(ctx.device()).c_str());
  Json out;
  out["checkpoint"] = ckpt;
  out["device"] = device_name(ctx.device());
  out["provenance"] = ctx.summary()["provenance"];
  const std::string text = st.final_test(out);
  write_file_atomic(ctx.out_path("evaluation.json"), out.dump() + "\n");
  std::printf("%s", text.c_str());
  return kExitOk;
}

// --evaluate CKPT --export-weights OUT: CKPT's model tensors (every tensor but the
// optimizer's "optim.*" state, nn/checkpoint.h), its format, study and configuration
// into OUT. Nothing is built or loaded but the file: no device, no data.
int export_weights(const std::string& ckpt, const std::string& out) {
  const std::string suffix = ".safetensors";
  if (out.size() <= suffix.size() || out.compare(out.size() - suffix.size(), suffix.size(), suffix) != 0)
    throw UsageError("--export-weights '" + out + "': name the file *.safetensors");
  struct stat a, b;
  if (::stat(ckpt.c_str(), &a) == 0 && ::stat(out.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
    throw UsageError("--export-weights '" + out + "' is the checkpoint given to --evaluate: write the weights to "
                     "another file");
  nn::SafetensorsFile in;
  try {
    in = nn::read_safetensors(ckpt);
  } catch (const Error& e) {
    MN_THROW("--evaluate '", ckpt, "': ", e.message());
  }
  nn::NamedTensors keep;
  size_t dropped = 0;
  for (const auto& [name, t] : in.tensors) {
    if (name.rfind("optim.", 0) == 0) ++dropped;
    else keep.emplace_back(name, t);
  }
  MN_CHECK(!keep.empty(), "--evaluate '", ckpt, "' holds no model tensors (", dropped, " optimizer tensors only)");
  nn::Metadata md{{"study", md_string(in.metadata, "study", ckpt)},
                  {"config", md_string(in.metadata, "config", ckpt)},
                  {"weights_only", "true"}};
  if (auto it = in.metadata.find("format"); it != in.metadata.end()) md["format"] = it->second;
  try {
    nn::write_safetensors(out, keep, md);
  } catch (const Error& e) {
    MN_THROW("--export-weights '", out, "': ", e.message());
  }
  std::printf("exported %zu model tensors of %s to %s (%zu optimizer tensors left out)\n", keep.size(), ckpt.c_str(),
              out.c_str(), dropped);
  return kExitOk;
}

}  // namespace

void check_regular_file(const std::string& path, const std::string& flag) {
  struct stat s;
  if (::stat(path.c_str(), &s) != 0)
    MN_THROW(flag, ": cannot open '", path, "': ", std::strerror(errno));
  if (!S_ISREG(s.st_mode)) MN_THROW(flag, ": '", path, "' is not a regular file (a directory?)");
}

void StepInputs::keep(size_t i, const Tensor& t) {
  MN_CHECK(t.defined(), "StepInputs::keep: slot ", i, ": undefined tensor");
  if (slots_.size() <= i) slots_.resize(i + 1);
  Tensor& d = slots_[i];
  if (t.is_cpu()) {  // no graph on the CPU: the slot takes t itself (no copy)
    d = t;
    return;
  }
  if (d.defined() && d.shape() == t.shape() && d.dtype() == t.dtype() && d.device() == t.device()) {
    d.copy_(t);
    return;
  }
  d = t.clone();
  ++generation_;
}

const Tensor& StepInputs::operator[](size_t i) const {
  MN_CHECK(i < slots_.size() && slots_[i].defined(), "StepInputs: slot ", i, " was never filled (prepare_step)");
  return slots_[i];
}

DeviceStats host_device_stats(const Stats& s) {
  DeviceStats d;
  std::vector<double> v;
  for (const auto& [k, x] : s) {
    d.names.push_back(k);
    v.push_back(x);
  }
  d.values = Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
  return d;
}

Stats Study::must_override(const char* hook) const {
  MN_THROW(name(), ": the study does not implement Study::", hook, "(), which its shape (",
           epoch_shaped() ? "epoch-shaped" : "custom run()", ") needs");
}

bool is_directory(const std::string& path) {
  struct stat s;
  return ::stat(path.c_str(), &s) == 0 && S_ISDIR(s.st_mode);
}

void check_dir_usable(const std::string& path, const std::string& flag) {
  struct stat s;
  if (::stat(path.c_str(), &s) == 0)
    MN_CHECK(S_ISDIR(s.st_mode), flag, " '", path, "' exists and is not a folder (a file?); give a folder");
}

void make_dirs(const std::string& path, const std::string& flag) {
  check_dir_usable(path, flag);
  std::string cur;
  std::stringstream ss(path);
  std::string part;
  if (!path.empty() && path[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    ::mkdir(cur.c_str(), 0755);
  }
  struct stat s;
  MN_CHECK(::stat(path.c_str(), &s) == 0 && S_ISDIR(s.st_mode), flag, ": cannot create the folder '", path, "'");
}

int64_t md_int(const nn::Metadata& md, const std::string& key, const std::string& file, int64_t lo, int64_t hi) {
  const std::string& s = md_string(md, key, file);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  MN_CHECK(!s.empty() && *end == '\0' && errno == 0, "checkpoint '", file, "': metadata '", key, "' = '", s,
           "' is not an integer (a damaged or foreign file?)");
  MN_CHECK(v >= lo && v <= hi, "checkpoint '", file, "': metadata '", key, "' = ", v, " is out of range [", lo, ", ",
           hi, "] (a damaged or foreign file?)");
  return v;
}

double md_double(const nn::Metadata& md, const std::string& key, const std::string& file) {
  const std::string& s = md_string(md, key, file);
  if (s == "null") return std::nan("");  // a metric that was not finite
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  MN_CHECK(!s.empty() && *end == '\0', "checkpoint '", file, "': metadata '", key, "' = '", s,
           "' is not a number (a damaged or foreign file?)");
  return v;
}

const std::string& md_string(const nn::Metadata& md, const std::string& key, const std::string& file) {
  auto it = md.find(key);
  MN_CHECK(it != md.end(), "checkpoint '", file, "' has no metadata '", key,
           "' (not written by this study, or by an older version)");
  return it->second;
}

std::string exact_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::map<std::string, std::string> study_config(Study& st, const std::vector<std::string>& args, Device device) {
  Flags f(st.name(), st.description());
  declare_harness_flags(f, st);
  st.declare_flags(f);
  std::vector<std::string> a{st.name()};
  a.insert(a.end(), args.begin(), args.end());
  std::vector<char*> av;
  for (auto& x : a) av.push_back(x.data());
  MN_CHECK(f.parse(static_cast<int>(av.size()), av.data()), st.name(), ": --help is not a configuration");
  st.apply_presets(f, device, false);
  f.validate_ranges();
  std::map<std::string, std::string> out;
  for (const std::string& k : f.keys()) out[k] = f.text(k);
  return out;
}

Communicator& RunContext::device_comm() const {
  static std::unique_ptr<Communicator> nccl;
  const Device d = device();
  if (d.is_cpu() || world_size() == 1) return comm();
  if (!nccl) nccl = make_nccl_comm(comm(), d.index);
  return *nccl;
}

namespace {
// A data-parallel run's world, made once the flags parsed (MPI_Init under mpirun).
// Ranks other than 0 print nothing on stdout (their progress is rank 0's);
// errors go to stderr from every rank, prefixed with the rank.
bool g_world_ready = false;

void join_world(Study& st, std::string& prog) {
  const int n = world_size_from_env();
  if (n <= 1) return;
  if (!st.data_parallel())
    throw UsageError(st.name() + " does not run data-parallel: the launcher started " + std::to_string(n) +
                     " processes; run it as one process (without mpirun -np " + std::to_string(n) + ")");
  Communicator& w = world();
  g_world_ready = true;
  // Ranks on one node share its cores: without MN_NUM_THREADS each takes its share
  // (hardware threads / ranks on the node), not all of them.
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!std::getenv("MN_NUM_THREADS") && local && std::atoi(local) > 1)
    set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / std::atoi(local)));
  prog += " [rank " + std::to_string(w.rank()) + " of " + std::to_string(w.size()) + "]";
  if (w.rank() != 0 && !std::freopen("/dev/null", "w", stdout))
    std::fprintf(stderr, "%s: warning: cannot silence this rank's stdout\n", prog.c_str());
}

// --device cuda under mpirun: the GPU of this process's local rank.
Device rank_device(Device d, const Flags& f) {
  if (!g_world_ready || !d.is_cuda() || f.str("device").find(':') != std::string::npos) return d;
  return Device::cuda(launch_info_from_env().local_rank % std::max(1, cuda_device_count()));
}

// After a failure on this rank, every other rank would wait in its next collective:
// end them all now (MPI_Abort), with this rank's status.
int end_run(int code) {
  if (g_world_ready && code != kExitOk) world().abort(code);
  return code;
}
}  // namespace

int run_study(std::unique_ptr<Study> study, int argc, char** argv) {
  std::string prog = study ? study->name() : std::string("study");
  try {
    Study& st = *study;
    Flags f(st.name(), st.description());
    declare_harness_flags(f, st);
    st.declare_flags(f);
    try {
      if (!f.parse(argc, argv)) return kExitOk;
      join_world(st, prog);
      const bool evaluating = st.can_evaluate() && !f.str("evaluate").empty();
      if (st.can_evaluate() && !f.str("export-weights").empty() && !evaluating)
        throw UsageError("--export-weights needs --evaluate CKPT: the checkpoint whose weights it writes");
      if (f.flag("resume")) {
        if (evaluating) throw UsageError("--resume and --evaluate exclude each other");
        const std::string ckpt = f.str("out-dir") + "/last.safetensors";
        check_resume_checkpoint(f.str("out-dir"), ckpt);
        apply_resume_contract(f, st, ckpt);
        check_resume_world_size(nn::read_safetensors_metadata(ckpt), ckpt);  // before any data is loaded
      }
      if (evaluating) apply_evaluate_checkpoint(f, st, f.str("evaluate"));
    } catch (const UsageError&) {
      throw;
    } catch (const Error& e) {
      throw UsageError(e);
    }
    const bool evaluating = st.can_evaluate() && !f.str("evaluate").empty();
    if (evaluating && !f.str("export-weights").empty()) {
      if (g_world_ready && world().rank() != 0) return kExitOk;  // one file, from rank 0
      return export_weights(f.str("evaluate"), f.str("export-weights"));  // no device, no data
    }
    const Device device = rank_device(choose_device(f), f);
    try {
      st.apply_presets(f, device, evaluating);
      f.validate_ranges();
      st.announce_presets(f);
      check_dir_usable(f.str("out-dir"), "--out-dir");  // before the study's data checks
      st.check_flags(f, evaluating);
      make_dirs(f.str("out-dir"), "--out-dir");
    } catch (const Error& e) {
      throw UsageError(e);
    }
    if (f.user_set("deterministic")) set_deterministic(f.flag("deterministic"));
    else if (deterministic()) f.set("deterministic", "true", Flags::Origin::Preset, "MN_DETERMINISTIC");
    PrecisionChoice prec;
    try {
      prec = choose_precision(f, device);
    } catch (const Error& e) {
      throw UsageError(e);
    }
    kernels::set_conv_precision(prec.conv);
    kernels::set_matmul_precision(prec.matmul);
    std::printf("%s on %s (%s)\n", prog.c_str(), device_name(device).c_str(), precision_words(prec).c_str());
    Context ctx(f, device, st.name());
    ctx.summary()["provenance"] = provenance_json(argc, argv, device);
    if (evaluating) {
      if (g_world_ready && ctx.rank() != 0) return kExitOk;  // one evaluation, on rank 0
      return evaluate_only(st, ctx);
    }
    return run_training(st, ctx);
  } catch (const UsageError& e) {
    // One line in the user's words (error.h: MN_DEBUG_ERRORS=1 adds the check and file:line).
    std::fprintf(stderr, "%s: %s\n", prog.c_str(), user_message(e).c_str());
    return end_run(kExitUsage);
  } catch (const TimeLimitTooShort& e) {
    std::fprintf(stderr, "%s: %s\n", prog.c_str(), user_message(e).c_str());
    return end_run(kExitUsage);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s%s\n", prog.c_str(), user_message(e).c_str(),
                 g_world_ready ? " (ending every rank of the run)" : "");
    return end_run(kExitFailed);
  } catch (...) {
    std::fprintf(stderr, "%s: error: an unknown exception stopped the run\n", prog.c_str());
    return end_run(kExitFailed);
  }
}

}  // namespace mn::exp
