// The study harness's entry point (see harness.h): run_study parses the flags,
// applies the resume contract or --evaluate's checkpoint, chooses the device,
// the presets and the precision, makes the run's Context and runs the study
// (run_training, evaluate_only or export_weights), turning every exception into
// one line and an exit status (main()'s error handling). It calls the other
// harness files through harness_internal.h, which lists them by duty.
#include "experiments/common/harness.h"

#include <sys/stat.h>

#include <cstdio>
#include <exception>
#include <string>

#include "experiments/common/harness_internal.h"
#include "experiments/common/provenance.h"
#include "kernels/gemm_config.h"
#include "nn/module.h"
#include "runtime/determinism.h"
#include "runtime/error.h"

namespace mn::exp {

namespace {
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

// The epoch-shaped run (or Study::run for custom studies), then the outputs.
int run_training(Study& st, Context& ctx) {
  int rc;
  if (st.epoch_shaped()) {
    st.setup(ctx);
    rc = train_epochs(st, ctx);
  } else {
    st.setup(ctx);
    ctx.summary()["study"] = st.name();
    ctx.summary()["device"] = device_name(ctx.device());
    ctx.summary()["precision"] = precision_json();
    ctx.summary()["config"] = Json::parse(ctx.flags().to_json());
    write_file_atomic(ctx.out_path("config.txt"), ctx.flags().to_config());
    rc = st.run(ctx);
  }
  if (rc == kExitOk && ctx.rank() == 0) ctx.finish_outputs();
  return rc;
}

int run_study(std::unique_ptr<Study> study, int argc, char** argv) {
  std::string prog = study ? study->name() : std::string("study");
  try {
    Study& st = *study;
    Flags f(st.name(), st.description());
    declare_harness_flags(f, st);
    st.declare_flags(f);
    try {
      if (!f.parse(argc, argv)) return kExitOk;
      join_world(st, f, prog);
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
      if (world_joined() && world().rank() != 0) return kExitOk;  // one file, from rank 0
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
      if (world_joined() && ctx.rank() != 0) return kExitOk;  // one evaluation, on rank 0
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
                 world_joined() ? " (ending every rank of the run)" : "");
    return end_run(kExitFailed);
  } catch (...) {
    std::fprintf(stderr, "%s: error: an unknown exception stopped the run\n", prog.c_str());
    return end_run(kExitFailed);
  }
}

}  // namespace mn::exp
