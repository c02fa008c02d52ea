// A cost model, on the host, of every kernel of the Koch training step on the tensor-core
// path (tools/gpu_model.cpp prints it; tests/tools/test_gpu_model.cpp checks it). It takes
// the block tiles, the shared-memory layout, the copy maps, the k-step count and the
// weight-gradient split rule from kernels/mma_layout.h itself, and mirrors the launchers'
// dispatch (kernels/cuda/mma_conv.cu: which tile each convolution pass uses;
// kernels/cuda/gemm.cu: the dense GEMM's split-K), so a change of a tile or a rule there
// changes the prediction here without an edit. What the model cannot derive (the GPU's
// rates, the instruction cost of a gathered copy) is a stated, overridable assumption
// (Device, the kInstr* constants in gpu_model_lib.cpp), printed beside the output
// (gpu_model_report.cpp).
//
// Time of one implicit-GEMM launch: blocks = M tiles x N tiles x z; waves of SMs x
// blocks-per-SM (occupancy from the shared memory of StageLayout<..>::BYTES and, when a
// ptxas table is given, the registers); per wave, k-tiles x the slowest of the SM's
// shared resources for one k-tile of every resident block (tensor pipe at the mma.sync
// rate, shared-memory wavefronts at 128 B a clock, warp-instruction issue at 4 a clock,
// the SM's share of L2 bandwidth), or the copy latency the pipeline's stages do not
// cover, plus the pipeline start and the epilogue; the kernel is then no faster than its
// unique HBM bytes at the achievable HBM rate. Memory-bound kernels (pooling, ReLU,
// Adam, fills, sums): bytes / bandwidth, at least a minimum kernel time.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mn::gpu_model {

// The GPU: published rates of an H200 SXM (H100 SXM silicon, HBM3e) and the assumptions
// of the model; every field is printed in the output header.
struct Device {
  std::string name = "NVIDIA H200 SXM (132 SMs)";
  int sms = 132;
  double clock_ghz = 1.83;         // the clock behind NVIDIA's dense peaks: 132 x 2048 x 1.83 GHz = 494.7 TFLOP/s TF32
  double tf32_fma_clk_sm = 1024;   // dense TF32 FMA per SM per clock (wgmma peak, 494.7 TFLOP/s)
  double bf16_fma_clk_sm = 2048;   // dense BF16 (989.4 TFLOP/s)
  double mma_sync_frac = 0.65;     // the share of that peak mma.sync reaches on sm_90 (see the header)
  double one_block_eff = 0.80;     // tensor-pipe use with one 4-warp block on an SM (one warp per scheduler)
  double smem_bytes_clk = 128;     // shared memory: one 128-byte wavefront per clock per SM
  double issue_clk = 4;            // warp instructions issued per clock per SM (4 schedulers)
  double l2_tbs = 7.0;             // L2 -> SM bandwidth, TB/s, all SMs together
  double l2_port_bytes_clk = 64;   // the most one SM takes from L2 per clock
  double hbm_tbs = 4.8;            // HBM3e, published
  double hbm_eff = 0.77;           // achievable share for streaming kernels (Adam, H200, 2026-11-27)
  double l2_mb = 50;               // L2 capacity: a memory-bound kernel whose bytes fit in half of it runs at L2 rate
  int smem_sm = 228 * 1024;        // shared memory per SM, bytes
  int smem_block_max = 227 * 1024; // per block
  int smem_reserved = 1024;        // reserved per resident block
  int regs_sm = 65536, threads_sm = 2048, blocks_sm = 32;
  double latency_clk = 700;        // round trip of a cp.async from L2 (pipeline start, uncovered stages)
  double host_launch_us = 4.0;     // host time per launch, eager (the GPU waits when kernels are shorter)
  double gap_us = 1.0;             // GPU time between dependent launches (eager and CUDA graph alike)
  double min_kernel_us = 2.0;      // the shortest kernel (launch ramp, one wave of tiny blocks)
  bool ca_l1_wavefront = true;     // a 4-byte cp.async.ca also costs an L1 read wavefront (L1 and smem share the SRAM)
  double overlap_eff = 1.0;        // share of its binding limit an implicit-GEMM wave reaches (1: perfect overlap)
  bool issue_from_ptx = false;     // take the PTX loop counts (an upper bound) as the issued instructions
};

enum class TileKind { Big, Wide, Mid };
enum class Loader { Dense, ConvCols, WgradDy, WgradImg, BwdDataCols };
enum class Epi { Gemm, ConvFwd, Split };

// A block tile's constants, read from kernels/mma_layout.h (TileBig, TileWide, TileMid).
struct TileInfo {
  const char* name;
  int BM, BN, BK, WARPS_M, WARPS_N, WARPS, THREADS, STAGES, MIN_BLOCKS, FM, FN;
};
TileInfo tile_info(TileKind t);
// StageLayout<Cfg, A_KCONTIG, B_KCONTIG>::BYTES: the dynamic shared memory of one block.
int stage_bytes(TileKind t, bool a_kcontig, bool b_kcontig);
// LoadMap of an operand tile (A: XT = BM, B: XT = BN) copied V floats at a time.
struct MapInfo {
  int per_row, ncol, step, count;  // LoadMap::PER_ROW, NCOL, STEP, COUNT
};
MapInfo load_map(TileKind t, bool is_a, bool kcontig, int v);

// A convolution's geometry (kernels/mma_layout.h ConvGeom32 without the dependency).
struct Geom {
  int N, C, H, W, K, R, S, P, Q, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
};

// One launch of mma_igemm_kernel as the launchers make it.
struct MmaLaunch {
  std::string name;  // e.g. "conv2 fwd"
  TileKind tile = TileKind::Big;
  bool bf16 = false;
  Loader la = Loader::Dense, lb = Loader::Dense;
  int va = 1, vb = 1;  // copy width of a dense operand (4: 16-byte cp.async.cg; 1: 4-byte .ca)
  bool a_kcontig = true, b_kcontig = false;
  Epi epi = Epi::Gemm;
  bool relu = false, bias = false;
  int64_t M = 0, N = 0, Kd = 0;  // Kd: the k extent of one z (a split's or a batch entry's)
  int64_t gz = 1;                // gridDim.z: splits or batch
  bool has_geom = false;
  Geom g;              // the geometry the gathers read (forward of the gathered tensor)
  double hbm_bytes = 0;  // unique global bytes: operands once, the output once
  bool ktable = false;   // a k gather table staged in shared memory
};

// The ptxas -v numbers of one kernel instantiation and, from cuobjdump -sass, its main
// loop's instruction mix (-1: not in the table).
struct PtxasEntry {
  int regs = -1, spill_stores = 0, spill_loads = 0, stack = 0;
  int loop_instr = -1, loop_hmma = 0, loop_ldsm = 0, loop_lds = 0, loop_ldgsts = 0, loop_bar = 0;
  int inner_instr = 0, inner_hmma = 0;  // the k-step loop inside it, when the compiler kept one
  std::string loop_source;              // "sass" (cuobjdump) or "ptx" (before ptxas)
};
// Warp instructions of one k-tile from a loop entry, for mma_per_ktile MMAs per warp
// (-1 when the entry has no loop).
double compiled_instr_per_ktile(const PtxasEntry& e, double mma_per_ktile);
// Key of an instantiation: "<Big|Wide|Mid|BMxBNx..> <tf32|bf16> A=<loader>[/V] B=<loader>[/V] <epilogue>".
std::string launch_key(const MmaLaunch& l);
// Parses ptxas -v output (names demangled, as tools/gpu_model_ptxas.sh writes it) and the
// "sass|<name>|loop_instr=..." (or "ptx|...") lines of the same file; keys as launch_key. Non-igemm
// kernels are keyed by their demangled name up to the first '<' or '('.
std::map<std::string, PtxasEntry> parse_ptxas(const std::string& text);
// The key of one demangled mma_igemm_kernel name ("" if it is not one).
std::string key_of_demangled(const std::string& name);

struct KernelResult {
  std::string name, kind, tile, bound;
  int launches = 1;
  int64_t blocks = 0, ktiles = 0, wave = 0, splits = 1;
  int blocks_per_sm = 0, waves = 0;
  double tail_eff = 1;
  int smem = 0, regs = -1, spills = 0;
  double mmas = 0, flops = 0;
  double instr_per_mma = 0, instr_per_mma_compiled = -1;  // counted from the code / from the compiled loop
  std::string compiled_source;                            // "sass", "ptx" or 
  double smem_bytes_per_mma = 0;
  double t_mma_us = 0, t_smem_us = 0, t_issue_us = 0, t_l2_us = 0, t_hbm_us = 0;
  double time_us = 0;  // predicted GPU time, launch overhead not included
  double hbm_bytes = 0;
};

KernelResult model_mma(const MmaLaunch& l, const Device& d, const std::map<std::string, PtxasEntry>* ptx);
// A memory-bound kernel (or `launches` of them) moving `bytes` in all.
KernelResult model_mem(const std::string& name, double bytes, int launches, const Device& d);
// Launches of one kind with their own byte counts (one per tensor: a fill, an axpy).
KernelResult model_mem_list(const std::string& name, const std::vector<double>& bytes, const Device& d);

// The dense GEMM's split-K rule: mma::dense_split_k (kernels/mma_layout.h), the function
// kernels/cuda/gemm.cu's split_k_count calls, over a wave of SMs x blocks_per_sm.
int64_t dense_split_k(int64_t M, int64_t N, int64_t K, int sms, int blocks_per_sm);
// Blocks of one instantiation an SM holds (shared memory, registers when known, threads).
int blocks_per_sm(TileKind t, int smem_bytes, int regs, const Device& d);

struct StepResult {
  int triplets = 0;
  bool bf16 = false;
  std::vector<KernelResult> kernels;
  double gpu_us = 0;       // sum of the kernels
  int launches = 0;
  double eager_ms = 0;     // max(GPU + gaps, host launch time)
  double graph_ms = 0;     // GPU + gaps
  double gemm_us = 0, other_us = 0;
};
// The Koch triplet training step (bench/bench_train_step.cpp's TrainStep: 3B images
// through one branch, global loss, backward, Adam, zero_grad) on the CUDA tensor-core path.
StepResult model_step(int triplets, bool bf16, const Device& d, const std::map<std::string, PtxasEntry>* ptx);

// Output: the assumptions, then per step the kernel table and the totals against targets.
// `sensitivity`: the 50-triplet totals again under other assumptions (label, TF32, BF16).
struct Sensitivity {
  std::string label;
  double tf32_ms, bf16_ms;
};
std::vector<Sensitivity> sensitivity(const Device& d, const std::map<std::string, PtxasEntry>* ptx);
std::string report_markdown(const std::vector<StepResult>& steps, const Device& d, const std::string& ptxas_source,
                            const std::map<std::string, PtxasEntry>* ptx, const std::vector<Sensitivity>& sens = {});
std::string report_json(const std::vector<StepResult>& steps, const Device& d, const std::string& ptxas_source);

// The targets the step is judged by (ms at 50 triplets; 0: none).
double target_ms(int triplets, bool bf16);

}  // namespace mn::gpu_model
