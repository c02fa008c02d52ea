// The reports of tools/gpu_model.h: the Markdown tables with the assumptions beside them,
// the sensitivity of the 50-triplet verdicts, the JSON.
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "tools/gpu_model.h"

namespace mn::gpu_model {

// ---- reports ------------------------------------------------------------------------------
namespace {
std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
// The H200's measured references for the 50-triplet TF32 table (cuDNN's best TF32
// algorithm per pass, cuBLAS TF32 for the dense layer's forward), from
// bench/results/2026-11-27-NVIDIA-H200-conv.json and ...-gemm.json; not our kernels.
double reference_us(const std::string& name) {
  static const std::pair<const char*, double> refs[] = {
      {"conv1 fwd", 917.8}, {"conv2 fwd", 877.8}, {"conv3 fwd", 195.1}, {"conv4 fwd", 94.6},
      {"conv2 dX", 831.6},  {"conv3 dX", 219.4},  {"conv4 dX", 130.3},  {"conv1 dW", 1039.3},
      {"conv2 dW", 2044.3}, {"conv3 dW", 219.9},  {"conv4 dW", 99.8},   {"dense fwd", 100.0}};
  for (const auto& r : refs)
    if (name.rfind(r.first, 0) == 0 && (name.size() == std::string(r.first).size() || name[std::string(r.first).size()] == ' '))
      return r.second;  // "conv1 fwd (+bias, ReLU)", "dense fwd (split-K 4)" 
  return -1;
}
std::string precision(bool bf16) { return bf16 ? "BF16" : "TF32"; }
}  // namespace

std::vector<Sensitivity> sensitivity(const Device& d, const std::map<std::string, PtxasEntry>* ptx) {
  std::vector<Sensitivity> out;
  auto add = [&](const std::string& label, const Device& v) {
    out.push_back({label, model_step(50, false, v, ptx).eager_ms, model_step(50, true, v, ptx).eager_ms});
  };
  add("as assumed above", d);
  Device v = d;
  v.mma_sync_frac = 0.5;
  add("mma.sync at 0.50 of the wgmma peak", v);
  v = d;
  v.mma_sync_frac = 0.8;
  add("mma.sync at 0.80 of the wgmma peak", v);
  v = d;
  v.overlap_eff = 0.75;
  add("implicit-GEMM waves at 75 % of their binding limit", v);
  v = d;
  v.ca_l1_wavefront = false;
  add("4-byte cp.async.ca without an L1 wavefront", v);
  if (ptx) {
    v = d;
    v.issue_from_ptx = true;
    add("issue at the PTX instruction counts (an upper bound)", v);
  }
  v = d;
  v.l2_tbs = 5.5;
  add("L2 at 5.5 TB/s", v);
  v = d;
  v.hbm_eff = 0.6;
  add("HBM at 60 % of 4.8 TB/s", v);
  v = d;
  v.clock_ghz = 1.6;
  add("clock 1.6 GHz", v);
  return out;
}

namespace {
// What binds the 50-triplet steps, and the measured references beside the model.
void write_bindings(std::ostringstream& o, const std::vector<StepResult>& steps, const Device& d) {
  for (const auto& s : steps) {
    if (s.triplets != 50) continue;
    std::map<std::string, double> by;
    for (const auto& k : s.kernels) by[k.bound] += k.time_us;
    std::vector<const KernelResult*> top;
    for (const auto& k : s.kernels) top.push_back(&k);
    std::sort(top.begin(), top.end(), [](const KernelResult* a, const KernelResult* b) { return a->time_us > b->time_us; });
    o << "\n### What binds the 50-triplet " << precision(s.bf16) << " step\n\nPredicted GPU time by binding resource: ";
    bool first = true;
    for (const auto& [b, t] : by) {
      o << (first ? "" : ", ") << b << " " << fmt("%.2f", t / 1e3) << " ms (" << fmt("%.0f", 100 * t / s.gpu_us) << " %)";
      first = false;
    }
    o << ". The five longest kernels: ";
    for (size_t i = 0; i < 5 && i < top.size(); ++i)
      o << (i ? "; " : "") << top[i]->name << " " << fmt("%.0f", top[i]->time_us) << " us (" << top[i]->bound
        << (top[i]->kind == "mma" ? ", " + fmt("%.0f", top[i]->smem_bytes_per_mma) + " B of shared memory per MMA" : std::string())
        << ")";
    const double budget = d.smem_bytes_clk / d.mma_sync_frac;
    o << ". Shared memory feeds " << fmt("%.0f", budget) << " B per MMA at the assumed mma.sync rate (128 B/clk / "
      << fmt("%.2f", d.mma_sync_frac) << " MMA/clk); a kernel above that is bound by shared memory, not by the tensor cores"
      << (s.bf16 ? " (BF16 MMAs do twice the work of TF32's on the same float32 stages: twice the bytes per MMA)" : "")
      << ".\n";
  }
  {
    // References measured on the H200 (2026-11-27): cuDNN's best TF32 algorithm per pass
    // (bench/results/2026-11-27-NVIDIA-H200-conv.json), cuBLAS TF32 for the dense forward
    // (...-gemm.json), PyTorch eager TF32 (...-train_step-torch.jsonl), our old Adam kernel
    // (...-train_step-kernels.csv, 2 launches a step over the same bytes).
    const StepResult* s50 = nullptr;
    for (const auto& s : steps)
      if (s.triplets == 50 && !s.bf16) s50 = &s;
    if (s50) {
      double ours = 0, ref = 0;
      for (const auto& k : s50->kernels) {
        const double r = k.kind == "mma" ? reference_us(k.name) : -1;
        if (r > 0 && k.name.rfind("dense", 0) != 0) ours += k.time_us, ref += r;
      }
      double adam = 0, dense = 0;
      for (const auto& k : s50->kernels) {
        if (k.name.rfind("Adam", 0) == 0) adam = k.time_us;
        if (k.name.rfind("dense fwd", 0) == 0) dense += k.time_us;  // the split GEMM and its sum
      }
      o << "\n### Against the H200 measurements of 2026-11-26/27 (50 triplets, TF32)\n\n"
        << "| quantity | model | measured | note |\n|---|---:|---:|---|\n"
        << "| the 11 convolution passes of a step (our mma.sync kernels) | " << fmt("%.2f", ours / 1e3) << " ms | "
        << fmt("%.2f", ref / 1e3) << " ms | cuDNN's best TF32 algorithms (FFT for layer 2): not our kernels; ours measured "
        << "then (the old WMMA path) 30.4 ms |\n"
        << "| the training step | " << fmt("%.2f", s50->eager_ms) << " ms | 11.34 ms | PyTorch 2.11 eager TF32; ours then 37.6 ms |\n"
        << "| Adam over 38.9 M parameters | " << fmt("%.0f", adam) << " us | 295 us | the old kernel, the calibration of the HBM "
        << "efficiency (it is the same bytes) |\n"
        << "| dense forward 150 x 4096 x 9216 (+ its split-K sum) | " << fmt("%.0f", dense)
        << " us | 100 us | cuBLAS TF32 (wgmma). The model is a bound (perfect overlap of the resources): a prediction "
        << "below a tuned library's measurement says what our kernel cannot beat, not what it will reach |\n";
    }
  }
}

// Registers and spills of every tensor-core instantiation, then the per-kernel tables.
void write_ptxas_and_kernels(std::ostringstream& o, const std::vector<StepResult>& steps, const Device& d,
                             const std::string& ptxas_source, const std::map<std::string, PtxasEntry>* ptx,
                             int ptxas_entries) {
  if (ptxas_entries > 0) {
    o << "\n## Registers and spills of every tensor-core instantiation (ptxas -v, sm_90)\n\n"
      << "From `" << ptxas_source << "` (tools/gpu_model_ptxas.sh). Dynamic shared memory from `StageLayout<..>::BYTES`; "
      << "blocks per SM from it and the registers (the launch bounds ask for " << tile_info(TileKind::Big).MIN_BLOCKS
      << "). Loop: the main loop of the compiled code (" << "per k-tile, its k-step loop counted per k-step).\n\n"
      << "| instantiation (tile, precision, layout A/B k-contiguous, loaders / copy width, epilogue) | regs | spill st/ld B | "
         "stack B | smem B | blocks/SM | loop: instr, MMA, ldmatrix, LDS, cp.async (source) |\n|---|---:|---:|---:|---:|---:|---|\n";
    for (const auto& [k, e] : *ptx) {
      if (k.find(" A=") == std::string::npos) continue;
      int smem = -1, bps = -1;
      const size_t lp = k.find(" L=");
      for (TileKind t : {TileKind::Big, TileKind::Wide, TileKind::Mid})
        if (k.rfind(std::string(tile_info(t).name) + " ", 0) == 0 && lp != std::string::npos && lp + 4 < k.size()) {
          smem = stage_bytes(t, k[lp + 3] == 't', k[lp + 4] == 't');
          bps = blocks_per_sm(t, smem, e.regs, d);
        }
      o << "| " << k << " | " << e.regs << " | " << e.spill_stores << " / " << e.spill_loads << " | " << e.stack << " | "
        << (smem > 0 ? std::to_string(smem) : "?") << " | " << (bps >= 0 ? std::to_string(bps) : "?") << " | ";
      if (e.loop_instr > 0)
        o << e.loop_instr << (e.inner_instr > 0 ? " (k-step loop " + std::to_string(e.inner_instr) + ")" : std::string()) << ", "
          << e.loop_hmma << ", " << e.loop_ldsm << ", " << e.loop_lds << ", " << e.loop_ldgsts << " (" << e.loop_source << ")";
      o << " |\n";
    }
  }

  for (const auto& s : steps) {
    const bool ref = s.triplets == 50 && !s.bf16;
    o << "\n## " << s.triplets << " triplets (" << 3 * s.triplets << " images), " << precision(s.bf16) << "\n\n"
      << "| kernel | tile | blocks | blk/SM | waves (tail) | splits | regs / spill | smem KB | instr/MMA model / compiled | "
         "smem B/MMA | tensor us | smem us | issue us | L2 us | HBM us | bound | **predicted us** |"
      << (ref ? " cuDNN/cuBLAS TF32 us |" : "") << "\n|---|---|---:|---:|---|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---|---:|"
      << (ref ? "---:|" : "") << "\n";
    for (const auto& k : s.kernels) {
      if (k.kind == "mma") {
        o << "| " << k.name << " | " << k.tile << " | " << k.blocks << " | " << k.blocks_per_sm << " | " << k.waves << " ("
          << fmt("%.0f", 100 * k.tail_eff) << " %) | " << k.splits << " | "
          << (k.regs > 0 ? std::to_string(k.regs) + " / " + std::to_string(k.spills) : std::string("?")) << " | "
          << fmt("%.1f", k.smem / 1024.0) << " | " << fmt("%.2f", k.instr_per_mma) << " / "
          << (k.instr_per_mma_compiled > 0 ? fmt("%.2f", k.instr_per_mma_compiled) + " " + k.compiled_source : "?") << " | "
          << fmt("%.0f", k.smem_bytes_per_mma)
          << " | " << fmt("%.1f", k.t_mma_us) << " | " << fmt("%.1f", k.t_smem_us) << " | " << fmt("%.1f", k.t_issue_us) << " | "
          << fmt("%.1f", k.t_l2_us) << " | " << fmt("%.1f", k.t_hbm_us) << " | " << k.bound << " | **"
          << fmt("%.1f", k.time_us) << "** |";
      } else {
        o << "| " << k.name << (k.launches > 1 ? " (x" + std::to_string(k.launches) + ")" : "") << " | memory | | | | | | | | | | | | | "
          << fmt("%.1f", k.t_hbm_us) << " | " << k.bound << " | **" << fmt("%.1f", k.time_us) << "** |";
      }
      if (ref) {
        const double r = k.kind == "mma" ? reference_us(k.name) : -1;
        o << " " << (r > 0 ? fmt("%.0f", r) : "") << " |";
      }
      o << "\n";
    }
    o << "| **step** | | | | | | | | | | | | | | | " << s.launches << " launches | **" << fmt("%.0f", s.gpu_us) << "** |"
      << (ref ? " |" : "") << "\n";
  }
}

}  // namespace

std::string report_markdown(const std::vector<StepResult>& steps, const Device& d, const std::string& ptxas_source,
                            const std::map<std::string, PtxasEntry>* ptx, const std::vector<Sensitivity>& sens) {
  std::ostringstream o;
  int ptxas_entries = 0;
  if (ptx)
    for (const auto& [k, e] : *ptx) ptxas_entries += k.find(" A=") != std::string::npos && e.regs > 0;
  const TileInfo tb = tile_info(TileKind::Big), tw = tile_info(TileKind::Wide), tm = tile_info(TileKind::Mid);
  o << "# Cost model of the Koch training step on the tensor-core path (" << d.name << ")\n\n"
    << "Written by `tools/gpu_model` (tools/gpu_model.h, gpu_model_lib.cpp, gpu_model_report.cpp) from the tiles, shared-memory layouts,\n"
    << "copy maps and split rules of `kernels/mma_layout.h` and the dispatch of `kernels/cuda/mma_conv.cu`,\n"
    << "`mma_gemm.cu` and `gemm.cu` as they are in this tree; registers and spills from "
    << (ptxas_entries > 0 ? "`" + ptxas_source + "` (" + std::to_string(ptxas_entries) + " kernels)" : std::string("no ptxas table"))
    << ". A prediction, not a measurement: every\nnumber below is to be checked against the first H200 run "
    << "(`bench_train_step` BM_TrainStepGpuTf32/Bf16, `bench_conv`, Nsight Compute).\n\n"
    << "Tiles (kernels/mma_layout.h): Big " << tb.BM << "x" << tb.BN << ", " << tb.WARPS << " warps of " << tb.BM / tb.WARPS_M
    << "x" << tb.BN / tb.WARPS_N << ", " << tb.STAGES << " stages, " << stage_bytes(TileKind::Big, true, false)
    << " B smem; Wide " << tw.BM << "x" << tw.BN << ", " << tw.STAGES << " stages, "
    << stage_bytes(TileKind::Wide, true, false) << " B; Mid " << tm.BM << "x" << tm.BN << ", " << tm.STAGES
    << " stages, " << stage_bytes(TileKind::Mid, true, true) << " B; BK " << tb.BK << "; launch bounds ask for "
    << tb.MIN_BLOCKS << " blocks per SM.\n\n";
  o << "## Assumptions\n\n"
    << "- **Tensor rate.** NVIDIA's dense peaks for H100/H200 SXM are wgmma peaks: TF32 494.7 TFLOP/s = "
    << d.sms << " SMs x " << d.tf32_fma_clk_sm << " FMA/clk x 2 x " << d.clock_ghz << " GHz, BF16 989.4 (" << d.bf16_fma_clk_sm
    << " FMA/clk). Our kernels issue `mma.sync` (m16n8k8 TF32 = 1024 FMA, m16n8k16 BF16 = 2048 FMA),\n"
    << "  which on sm_90 does not reach that peak; assumed: **" << fmt("%.2f", d.mma_sync_frac)
    << "** of it (Ampere-style kernels on H100 are reported at about 60-70 % of the wgmma peak;\n"
    << "  FlashAttention-2, mma.sync, reaches ~35 % end to end where FlashAttention-3 with wgmma reaches ~75 %). "
    << "One block alone on an SM (one warp per scheduler) keeps the tensor pipe "
    << fmt("%.0f", 100 * d.one_block_eff) << " % busy.\n"
    << "- **Shared memory** " << d.smem_bytes_clk << " B/clk/SM: cp.async writes (stage bytes / 128), fragment reads "
    << "(ldmatrix.x4 = 4 wavefronts, a conflict-free 32-bit LDS = 1; the padding of SmemTile makes them conflict-free),\n"
    << "  the k-entry loads (a broadcast LDS.128 per gathered row: 1; the weight gradient's per-lane entries: 4), and the L1 read\n"
    << "  of every 4-byte `cp.async.ca` (L1 and shared memory share one SRAM; assumed to cost a wavefront each: "
    << (d.ca_l1_wavefront ? "on" : "off") << ").\n"
    << "- **Issue** " << d.issue_clk << " warp instructions/clk/SM. Instructions per MMA (`model`) counted from the code: "
    << "MMA, ldmatrix/LDS, one cvt per fragment register (TF32 rounding; BF16 packs\n"
    << "  pairs), 6-22 per copy by loader, 20 per k-tile for the pipeline. `compiled`: from the main loop of the "
    << "compiled kernel (per k-tile = the k-tile loop + (k-steps - 1) x its k-step loop):\n"
    << "  the SASS (cuobjdump), which then replaces the model's count, or, where no cuobjdump exists (this machine), "
    << "the PTX the same compile kept: before ptxas folds the shared-memory\n"
    << "  addresses into offsets, so an upper bound shown beside the model's count, not used for the time.\n"
    << "- **L2 -> SM** " << d.l2_tbs << " TB/s for all SMs (chipsandcheese measured 5.5 TB/s on an H100 PCIe, 114 SMs at 1.755 GHz; "
    << "scaled to 132 SMs), at most " << d.l2_port_bytes_clk << " B/clk per SM. Dense tiles are re-read by every block\n"
    << "  row/column; gathered operands bring each input row once per block (re-reads across r, s hit L1).\n"
    << "- **HBM** " << d.hbm_tbs << " TB/s (HBM3e) x " << fmt("%.2f", d.hbm_eff)
    << " achievable (Adam reached 77 % on the H200, 2026-11-27 profile); each kernel's unique bytes (operands once,\n"
    << "  outputs once; split-K partials written and read). A memory-bound kernel whose bytes fit in half of the " << d.l2_mb
    << " MB L2 runs at the L2 rate. Memory-bound kernels: at least " << d.min_kernel_us << " us each.\n"
    << "- **Waves.** Blocks per SM from the smem of `StageLayout<..>::BYTES` (+" << d.smem_reserved << " B each, "
    << d.smem_sm / 1024 << " KB per SM) and, where ptxas is known, the registers (256-register warp granularity);\n"
    << "  waves = ceil(blocks / (SMs x blocks/SM)); the tail wave is modelled with the blocks it has. Per wave: "
    << "k-tiles x max(tensor, smem, issue, L2) of all resident blocks, or the copy latency\n"
    << "  (" << d.latency_clk << " clk) the pipeline's STAGES-1 tiles in flight do not cover; + 2 latencies of pipeline start; "
    << "+ the epilogue (8-16 instructions per accumulator, its bytes to L2). The k-tile rounds reach "
    << fmt("%.0f", 100 * d.overlap_eff) << " % of their binding limit (100 %: a bound, the fastest such a kernel can be).\n"
    << "- **Launches.** " << d.gap_us << " us of GPU time between kernels; eager steps also need " << d.host_launch_us
    << " us of host time per launch (the GPU waits when the host is slower): eager = max(GPU + gaps, launches x "
    << d.host_launch_us << " us), graph = GPU + gaps.\n"
    << "- **Clock** " << d.clock_ghz << " GHz sustained under tensor load (the H200 boosts to 1.98 GHz when it can).\n"
    << "- **Not modelled:** L1 capacity misses of the gathers, bank conflicts of the 16-byte dense copies, "
    << "the host cost of autograd, L2 residency between kernels (except the half-L2 rule), clock throttling; the global "
    << "loss and the concat/narrow glue are lumped as 10 launches over ten (3B, 4096) tensors.\n"
    << "- **The step** is bench/bench_train_step.cpp's: 3B images through the branch, global loss, backward, Adam "
    << "(one launch), zero_grad (a fill per parameter), each leaf gradient accumulated by an axpy.\n\n";

  o << "## Step totals\n\n"
    << "| triplets | images | precision | kernels | launches | GPU ms (GEMM / other) | graph ms | eager ms | target ms | "
       "eager vs target |\n|---:|---:|---|---:|---:|---|---:|---:|---:|---|\n";
  for (const auto& s : steps) {
    const double tgt = target_ms(s.triplets, s.bf16);
    o << "| " << s.triplets << " | " << 3 * s.triplets << " | " << precision(s.bf16) << " | " << s.kernels.size() << " | "
      << s.launches << " | " << fmt("%.2f", s.gpu_us / 1e3) << " (" << fmt("%.2f", s.gemm_us / 1e3) << " / "
      << fmt("%.2f", s.other_us / 1e3) << ") | " << fmt("%.2f", s.graph_ms) << " | " << fmt("%.2f", s.eager_ms) << " | "
      << (tgt > 0 ? fmt("%.1f", tgt) : "-") << " | "
      << (tgt > 0 ? (s.eager_ms <= tgt ? "**PASS**" : "**MISS**") : "no target") << " |\n";
  }
  o << "\nTargets: the step at 50 triplets <= 8 ms TF32, <= 5 ms BF16 (PyTorch 2.11 eager TF32 measured 11.34 ms on an "
       "H200, 2026-11-27; ours FP32 then 39.8 ms).\n";
  if (!sens.empty()) {
    o << "\n### How the 50-triplet verdicts move with the assumptions (eager ms)\n\n"
      << "| assumption changed | TF32 (target 8) | BF16 (target 5) |\n|---|---:|---:|\n";
    for (const auto& x : sens)
      o << "| " << x.label << " | " << fmt("%.2f", x.tf32_ms) << (x.tf32_ms <= 8.0 ? " PASS" : " MISS") << " | "
        << fmt("%.2f", x.bf16_ms) << (x.bf16_ms <= 5.0 ? " PASS" : " MISS") << " |\n";
  }

  write_bindings(o, steps, d);
  write_ptxas_and_kernels(o, steps, d, ptxas_source, ptx, ptxas_entries);
  return o.str();
}

std::string report_json(const std::vector<StepResult>& steps, const Device& d, const std::string& ptxas_source) {
  std::ostringstream o;
  auto num = [](double v) { return fmt("%.6g", v); };
  o << "{\n  \"model\": \"tools/gpu_model\",\n  \"device\": {\"name\": \"" << d.name << "\", \"sms\": " << d.sms
    << ", \"clock_ghz\": " << num(d.clock_ghz) << ", \"tf32_fma_clk_sm\": " << num(d.tf32_fma_clk_sm)
    << ", \"bf16_fma_clk_sm\": " << num(d.bf16_fma_clk_sm) << ", \"mma_sync_frac\": " << num(d.mma_sync_frac)
    << ", \"one_block_eff\": " << num(d.one_block_eff) << ", \"smem_bytes_clk\": " << num(d.smem_bytes_clk)
    << ", \"issue_clk\": " << num(d.issue_clk) << ", \"l2_tbs\": " << num(d.l2_tbs) << ", \"hbm_tbs\": " << num(d.hbm_tbs)
    << ", \"hbm_eff\": " << num(d.hbm_eff) << ", \"latency_clk\": " << num(d.latency_clk)
    << ", \"host_launch_us\": " << num(d.host_launch_us) << ", \"gap_us\": " << num(d.gap_us)
    << ", \"ca_l1_wavefront\": " << (d.ca_l1_wavefront ? "true" : "false") << ", \"overlap_eff\": " << num(d.overlap_eff)
    << ", \"issue_from_ptx\": " << (d.issue_from_ptx ? "true" : "false")
    << "},\n"
    << "  \"ptxas\": \"" << ptxas_source << "\",\n  \"steps\": [\n";
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& s = steps[i];
    const double tgt = target_ms(s.triplets, s.bf16);
    o << "    {\"triplets\": " << s.triplets << ", \"images\": " << 3 * s.triplets << ", \"precision\": \""
      << (s.bf16 ? "bf16" : "tf32") << "\", \"launches\": " << s.launches << ", \"gpu_ms\": " << num(s.gpu_us / 1e3)
      << ", \"graph_ms\": " << num(s.graph_ms) << ", \"eager_ms\": " << num(s.eager_ms)
      << ", \"target_ms\": " << (tgt > 0 ? num(tgt) : "null") << ", \"pass\": "
      << (tgt > 0 ? (s.eager_ms <= tgt ? "true" : "false") : "null") << ",\n     \"kernels\": [\n";
    for (size_t j = 0; j < s.kernels.size(); ++j) {
      const auto& k = s.kernels[j];
      o << "       {\"name\": \"" << k.name << "\", \"kind\": \"" << k.kind << "\", \"launches\": " << k.launches;
      if (k.kind == "mma")
        o << ", \"tile\": \"" << k.tile << "\", \"blocks\": " << k.blocks << ", \"blocks_per_sm\": " << k.blocks_per_sm
          << ", \"waves\": " << k.waves << ", \"tail_eff\": " << num(k.tail_eff) << ", \"splits\": " << k.splits
          << ", \"ktiles\": " << k.ktiles << ", \"regs\": " << k.regs << ", \"spill_bytes\": " << k.spills
          << ", \"smem_bytes\": " << k.smem << ", \"mmas\": " << num(k.mmas) << ", \"flops\": " << num(k.flops)
          << ", \"instr_per_mma_model\": " << num(k.instr_per_mma)
          << ", \"instr_per_mma_compiled\": " << (k.instr_per_mma_compiled > 0 ? num(k.instr_per_mma_compiled) : "null")
          << ", \"compiled_source\": \"" << k.compiled_source << "\""
          << ", \"smem_bytes_per_mma\": " << num(k.smem_bytes_per_mma) << ", \"tensor_us\": " << num(k.t_mma_us)
          << ", \"smem_us\": " << num(k.t_smem_us) << ", \"issue_us\": " << num(k.t_issue_us) << ", \"l2_us\": " << num(k.t_l2_us);
      o << ", \"hbm_bytes\": " << num(k.hbm_bytes) << ", \"hbm_us\": " << num(k.t_hbm_us) << ", \"bound\": \"" << k.bound
        << "\", \"predicted_us\": " << num(k.time_us) << "}" << (j + 1 < s.kernels.size() ? "," : "") << "\n";
    }
    o << "     ]}" << (i + 1 < steps.size() ? "," : "") << "\n";
  }
  o << "  ]\n}\n";
  return o.str();
}

}  // namespace mn::gpu_model
