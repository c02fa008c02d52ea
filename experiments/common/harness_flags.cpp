// The harness's own flags and what they choose before a run: declare_harness_flags
// (--device, --out-dir, --seed, --resume, the stop flags, --precision, ...), the
// precisions from --precision / --tf32 / MN_PRECISION and the device, the device
// from --device, and study_config (a study's resolved flags without running it).
// It calls Flags, kernels/gemm_config.h and the Study's flag hooks only.
#include <cstdlib>
#include <string>

#include "experiments/common/harness_internal.h"
#include "kernels/gemm_config.h"
#include "runtime/error.h"

namespace mn::exp {

void declare_harness_flags(Flags& f, const Study& st) {
  f.add_string("device", "auto", "auto (a GPU when there is one), cpu, cuda or cuda:N");
  f.add_string("out-dir", st.default_out_dir(), "where config.txt, metrics.jsonl, checkpoints, plots, "
               "summary.json and report.md go");
  f.add_int("seed", 1, "seed of initialisation, sampling and dropout", 0);
  f.add_bool("resume", false, "continue the run in --out-dir from last.safetensors (also from a mid-epoch "
             "stop) with its stored configuration; only --epochs, --time-limit, --stop-after, --collective-timeout, "
             "--device, --log-every, --out-dir, --data-dir and --cache-dir may differ");
  f.add_double("time-limit", 0, "stop resumably before this many seconds of wall time have passed (0: none); "
               "the progress is saved and --resume continues exactly. Exit status 3", 0, 1e9);
  f.add_int("stop-after", 0, "stop resumably after this many training steps in this run (0: none); exit status 3",
            0);
  f.add_double("collective-timeout", collective_timeout(), "data parallel (mpirun): a collective that waits this "
               "many seconds for the other ranks ends the job naming the ranks that did not answer (0: wait forever); "
               "longer than anything one rank does alone (rank 0's validation). MN_COLLECTIVE_TIMEOUT sets the "
               "default", 0, 1e9);
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

namespace {
// --tf32's value as one of conv, all, off (true / false: the boolean flag of
// earlier versions, in configs and checkpoints, read as all / off).
std::string tf32_mode(const std::string& v) {
  if (v == "conv" || v == "all" || v == "off") return v;
  if (v == "true") return "all";
  if (v == "false") return "off";
  throw UsageError("--tf32 " + v + ": expected conv, all or off (or use --precision fp32|tf32|bf16)");
}
}  // namespace

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

// What the convolutions and dense layers computed in (set by the harness from --precision).
Json precision_json() {
  Json j;
  j["conv"] = kernels::precision_name(kernels::conv_precision());
  j["matmul"] = kernels::precision_name(kernels::matmul_precision());
  return j;
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

}  // namespace mn::exp
