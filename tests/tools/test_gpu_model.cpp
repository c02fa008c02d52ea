// tools/gpu_model.h: invariants of the GPU cost model that a wrong change can break
// (waves, occupancy, the split rules the launchers use, the ptxas parser), on the host
// in seconds. The fixture tests/fixtures/gpu_model/ptxas_sm90.txt is an excerpt of
// tools/gpu_model_ptxas.sh's output (bench/results/2026-12-02-ptxas-sm90.txt).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "kernels/mma_layout.h"
#include "tools/gpu_model.h"

namespace gm = mn::gpu_model;
namespace mma = mn::kernels::mma;

namespace {
gm::MmaLaunch dense(int64_t M, int64_t N, int64_t K, bool bf16 = false) {
  gm::MmaLaunch l;
  l.name = "gemm";
  l.tile = gm::TileKind::Big;
  l.bf16 = bf16;
  l.la = l.lb = gm::Loader::Dense, l.va = l.vb = 4;
  l.a_kcontig = true, l.b_kcontig = false;
  l.M = M, l.N = N, l.Kd = K;
  l.hbm_bytes = 4.0 * (M * K + K * N + M * N);
  return l;
}
std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
// The kernel named `name`, or `name (...)` ("conv2 fwd (+bias, ReLU)", not "conv2 fwd x").
const gm::KernelResult* find(const gm::StepResult& s, const std::string& name) {
  for (const auto& k : s.kernels)
    if (k.name == name || k.name.rfind(name + " (", 0) == 0) return &k;
  return nullptr;
}
}  // namespace

// The tile constants come from kernels/mma_layout.h, not from a copy.
TEST(GpuModel, TilesAreTheHeaders) {
  const gm::TileInfo b = gm::tile_info(gm::TileKind::Big);
  EXPECT_EQ(b.BM, mma::TileBig::BM);
  EXPECT_EQ(b.BN, mma::TileBig::BN);
  EXPECT_EQ(b.STAGES, mma::TileBig::STAGES);
  EXPECT_EQ(b.THREADS, mma::TileBig::THREADS);
  EXPECT_EQ(gm::tile_info(gm::TileKind::Wide).BN, mma::TileWide::BN);
  EXPECT_EQ(gm::tile_info(gm::TileKind::Mid).STAGES, mma::TileMid::STAGES);
  EXPECT_EQ(gm::stage_bytes(gm::TileKind::Big, true, false), (mma::StageLayout<mma::TileBig, true, false>::BYTES));
  EXPECT_EQ(gm::stage_bytes(gm::TileKind::Mid, true, true), (mma::StageLayout<mma::TileMid, true, true>::BYTES));
}

// A known case: 4096 x 4096 outputs = 32 x 32 = 1024 tiles of 128 x 128; two blocks per
// SM (the launch bounds' MIN_BLOCKS, shared memory permitting) on 132 SMs = 264 a wave:
// 4 waves, the last 232 / 264 full, so 1024 / 1056 of the wave slots are used.
TEST(GpuModel, WavesOfAKnownGemm) {
  gm::Device d;
  const int per_sm = mma::TileBig::MIN_BLOCKS;
  ASSERT_EQ(gm::blocks_per_sm(gm::TileKind::Big, gm::stage_bytes(gm::TileKind::Big, true, false), -1, d), per_sm);
  const gm::KernelResult r = gm::model_mma(dense(4096, 4096, 4096), d, nullptr);
  EXPECT_EQ(r.blocks, 1024);
  EXPECT_EQ(r.wave, 132 * per_sm);
  EXPECT_EQ(r.waves, int((1024 + r.wave - 1) / r.wave));
  EXPECT_DOUBLE_EQ(r.tail_eff, 1024.0 / (r.waves * r.wave));
  EXPECT_EQ(r.ktiles, 4096 / 32);
  // Every MMA of the GEMM is counted: M N K / (16 x 8 x 8) for m16n8k8.
  EXPECT_DOUBLE_EQ(r.mmas, 4096.0 * 4096.0 * 4096.0 / (16 * 8 * 8));
}

// Occupancy: less shared memory per SM, fewer blocks, more waves, more time; registers
// over 128 a thread leave room for fewer 128-thread blocks than shared memory would.
TEST(GpuModel, OccupancyFollowsSharedMemoryAndRegisters) {
  gm::Device d;
  const int bytes = gm::stage_bytes(gm::TileKind::Big, true, false);
  gm::Device small = d;
  small.smem_sm = bytes + d.smem_reserved + 1024;  // room for one block
  EXPECT_EQ(gm::blocks_per_sm(gm::TileKind::Big, bytes, -1, small), 1);
  const auto a = gm::model_mma(dense(4096, 4096, 4096), d, nullptr);
  const auto b = gm::model_mma(dense(4096, 4096, 4096), small, nullptr);
  EXPECT_GT(b.waves, a.waves);
  EXPECT_GT(b.time_us, a.time_us);
  gm::Device roomy = d;
  roomy.smem_sm = 16 * bytes;
  EXPECT_EQ(gm::blocks_per_sm(gm::TileKind::Big, bytes, 128, roomy), 4);  // 128 x 128 x 4 = 65536 registers
  EXPECT_EQ(gm::blocks_per_sm(gm::TileKind::Big, bytes, 129, roomy), 3);  // 136 a thread after rounding
}

// Twice the SMs: every convolution and GEMM of the step, and the step, get faster.
TEST(GpuModel, TwiceTheSmsIsFaster) {
  gm::Device d;
  gm::Device big = d;
  big.sms = 2 * d.sms;
  for (bool bf16 : {false, true}) {
    const gm::StepResult a = gm::model_step(50, bf16, d, nullptr), b = gm::model_step(50, bf16, big, nullptr);
    EXPECT_LT(b.gpu_us, a.gpu_us);
    EXPECT_LT(b.eager_ms, a.eager_ms);
    const gm::KernelResult* c2a = find(a, "conv2 fwd");
    const gm::KernelResult* c2b = find(b, "conv2 fwd");
    ASSERT_TRUE(c2a && c2b);
    EXPECT_LT(c2b->time_us, c2a->time_us);
    EXPECT_LT(c2b->waves, c2a->waves);
  }
}

// BF16 halves the tensor time of the same launch (m16n8k16 does twice the work of
// m16n8k8 at the same instruction rate), and leaves the shared-memory traffic alone:
// the stages hold float32 in both precisions.
TEST(GpuModel, Bf16HalvesTheTensorTimeNotTheSharedMemory) {
  gm::Device d;
  const auto t = gm::model_mma(dense(4096, 4096, 4096, false), d, nullptr);
  const auto b = gm::model_mma(dense(4096, 4096, 4096, true), d, nullptr);
  EXPECT_NEAR(b.t_mma_us / t.t_mma_us, 0.5, 1e-9);
  EXPECT_NEAR(b.t_smem_us, t.t_smem_us, 1e-9);
  EXPECT_DOUBLE_EQ(b.mmas * 2, t.mmas);
}

// The predicted time is never below any of its bounds.
TEST(GpuModel, PredictionIsAtLeastEveryBound) {
  gm::Device d;
  for (int trip : {4, 16, 50})
    for (bool bf16 : {false, true}) {
      const gm::StepResult s = gm::model_step(trip, bf16, d, nullptr);
      for (const auto& k : s.kernels) {
        SCOPED_TRACE(k.name);
        EXPECT_GE(k.time_us + 1e-9, k.t_hbm_us);
        EXPECT_GE(k.time_us + 1e-9, std::max({k.t_mma_us, k.t_smem_us, k.t_issue_us, k.t_l2_us}));
        EXPECT_GT(k.time_us, 0);
      }
      EXPECT_GE(s.eager_ms, s.graph_ms);
      EXPECT_GE(s.graph_ms * 1e3, s.gpu_us);
    }
}

// The dispatch the step mirrors: kernels/cuda/gemm.cu's split-K (slices that fill whole
// waves of 132 x 2 blocks), the weight-gradient split of mma_conv.cu (wave_fit_k_per_split
// over SMs x blocks per SM), the tile choices.
TEST(GpuModel, StepMirrorsTheLaunchers) {
  // Forward at 150 images: 64 tiles; 4 slices make 256 of 264 blocks (9216 / 4 = 2304 deep).
  EXPECT_EQ(gm::dense_split_k(150, 4096, 9216, 132, 2), 4);
  // Backward-data: 144 tiles were 0.55 of a wave; 8 slices of 512: 1152 blocks, 5 waves x 64
  // k-steps of 8 (320), the least of wave_fit_time over the allowed slice counts.
  EXPECT_EQ(gm::dense_split_k(150, 9216, 4096, 132, 2), 8);
  EXPECT_EQ(gm::dense_split_k(150, 9216, 4096, 132, 1), 1);  // 144 tiles >= 132 one-block slots
  EXPECT_EQ(gm::dense_split_k(4096, 9216, 150, 132, 2), 1);  // K < 1024
  gm::Device d;
  const gm::StepResult s = gm::model_step(50, false, d, nullptr);
  for (const char* k : {"conv1 fwd", "conv2 fwd", "conv3 fwd", "conv4 fwd", "conv2 dX", "conv3 dX", "conv4 dX",
                        "conv1 dW", "conv2 dW", "conv3 dW", "conv4 dW", "dense fwd", "dense dX", "dense dW", "Adam"})
    EXPECT_NE(find(s, k), nullptr) << k;
  EXPECT_EQ(find(s, "conv1 dX"), nullptr);  // the images need no gradient
  EXPECT_NE(find(s, "conv1 fwd")->tile.find("Wide"), std::string::npos);  // K = 64
  EXPECT_NE(find(s, "conv2 dX")->tile.find("Wide"), std::string::npos);   // the flipped forward has K = C = 64
  EXPECT_NE(find(s, "conv1 dW")->tile.find("Mid"), std::string::npos);
  EXPECT_NE(find(s, "conv2 fwd")->tile.find("Big"), std::string::npos);
  // conv1 dW: 64 x 100 outputs = one Mid tile, K = 150 x 96 x 96 split to fill a wave.
  const gm::KernelResult* w1 = find(s, "conv1 dW");
  const int64_t wave = int64_t(d.sms) * w1->blocks_per_sm;
  const int kpz = mma::wave_fit_k_per_split(150 * 96 * 96, 1, wave, 32);
  EXPECT_EQ(w1->splits, (150 * 96 * 96 + kpz - 1) / kpz);
  EXPECT_EQ(w1->blocks, w1->splits);
  EXPECT_LE(w1->blocks, wave);
  EXPECT_NE(find(s, "conv1 dW sum_partials"), nullptr);
  // About 38.9 M parameters: Adam reads param, grad, m, v and writes param, m, v.
  const gm::KernelResult* adam = find(s, "Adam");
  EXPECT_NEAR(adam->hbm_bytes / 28.0, 38947648.0, 1.0);
}

// ptxas -v lines (names demangled) and the SASS loop lines: registers, spills and the
// loop's instruction mix land under the key the model computes for the same launch.
TEST(GpuModel, ParsesPtxasOutput) {
  const std::string name =
      "void mn::kernels::mma::mma_igemm_kernel<mn::kernels::mma::TileCfg<128, 128, 2, 2, 3, 2>, "
      "mn::kernels::mma::StageLayout<mn::kernels::mma::TileCfg<128, 128, 2, 2, 3, 2>, true, false>, "
      "(mn::kernels::mma::MathKind)1, mn::kernels::mma::DenseLoader<mn::kernels::mma::TileCfg<128, 128, 2, 2, 3, 2>, "
      "mn::kernels::mma::OperandTile<mn::kernels::mma::TileCfg<128, 128, 2, 2, 3, 2>, true, 128>, 4>, "
      "mn::kernels::mma::DenseLoader<mn::kernels::mma::TileCfg<128, 128, 2, 2, 3, 2>, "
      "mn::kernels::mma::OperandTile<mn::kernels::mma::TileCfg<128, 128, 2, 2, 3, 2>, false, 128>, 4>, "
      "mn::kernels::mma::GemmEpilogue>(T4, T5, T6, int, mn::kernels::mma::ZArgs, const mn::kernels::mma::Entry *)";
  const std::string text = "ptxas info    : Compiling entry function '" + name + "' for 'sm_90'\n" +
                           "ptxas info    : Function properties for " + name + "\n" +
                           "    8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads\n" +
                           "ptxas info    : Used 254 registers, used 1 barriers, 8 bytes cumulative stack size\n" +
                           "ptxas info    : Compiling entry function 'mn::kernels::(anonymous namespace)::fill_table(int)' for 'sm_90'\n" +
                           "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n" +
                           "ptxas info    : Used 20 registers\n" + "sass|" + name +
                           "|loop_instr=600 hmma=128 ldsm=48 lds=0 ldgsts=24 bar=1\n";
  const auto t = gm::parse_ptxas(text);
  gm::MmaLaunch l = dense(256, 256, 256, true);
  const std::string key = gm::launch_key(l);
  EXPECT_EQ(gm::key_of_demangled(name), key);
  ASSERT_TRUE(t.count(key)) << key;
  const gm::PtxasEntry& e = t.at(key);
  EXPECT_EQ(e.regs, 254);
  EXPECT_EQ(e.spill_stores, 12);
  EXPECT_EQ(e.spill_loads, 16);
  EXPECT_EQ(e.stack, 8);
  EXPECT_EQ(e.loop_instr, 600);
  EXPECT_EQ(e.loop_hmma, 128);
  EXPECT_EQ(e.loop_source, "sass");
  ASSERT_TRUE(t.count("mn::kernels::{anon}::fill_table"));
  EXPECT_EQ(t.at("mn::kernels::{anon}::fill_table").regs, 20);
  // The model uses them: spills reported, instructions per MMA from the SASS loop.
  const auto r = gm::model_mma(l, gm::Device{}, &t);
  EXPECT_EQ(r.regs, 254);
  EXPECT_EQ(r.spills, 28);
  EXPECT_DOUBLE_EQ(r.instr_per_mma_compiled, 600.0 / 128.0);
  EXPECT_EQ(r.compiled_source, "sass");
  // TF32 of the same launch is another instantiation: not found.
  l.bf16 = false;
  EXPECT_EQ(t.count(gm::launch_key(l)), 0u);
}

// The tiny fixture (an excerpt of the real output): the keys of the step's conv2
// forward and conv1 weight gradient, registers, the loop of the PTX, the plain kernel.
TEST(GpuModel, ParsesTheFixture) {
  const std::string text = read(std::string(MN_SOURCE_DIR) + "/tests/fixtures/gpu_model/ptxas_sm90.txt");
  ASSERT_FALSE(text.empty());
  const auto t = gm::parse_ptxas(text);
  EXPECT_EQ(t.size(), 3u);
  ASSERT_TRUE(t.count("mn::kernels::{anon}::sum_partials"));
  EXPECT_EQ(t.at("mn::kernels::{anon}::sum_partials").regs, 32);
  const gm::StepResult s = gm::model_step(50, false, gm::Device{}, &t);
  const gm::KernelResult* fwd = find(s, "conv2 fwd");
  const gm::KernelResult* dw = find(s, "conv1 dW");
  ASSERT_TRUE(fwd && dw);
  EXPECT_EQ(fwd->regs, 195);
  EXPECT_EQ(dw->regs, 154);
  EXPECT_EQ(fwd->spills, 0);
  EXPECT_EQ(fwd->compiled_source, "ptx");
  EXPECT_GT(fwd->instr_per_mma_compiled, 1.0);
  // PTX counts are shown, not used for the time (ptxas folds addresses), unless asked.
  const gm::StepResult none = gm::model_step(50, false, gm::Device{}, nullptr);
  EXPECT_DOUBLE_EQ(find(none, "conv2 fwd")->time_us, fwd->time_us);
  EXPECT_EQ(find(none, "conv2 fwd")->regs, -1);
}

// The committed table (bench/results/2026-12-02-ptxas-sm90.txt) has every tensor-core
// instantiation the step launches. A change of a tile's parameters, a loader or an
// epilogue makes it stale: regenerate it with tools/gpu_model_ptxas.sh.
TEST(GpuModel, CommittedPtxasTableCoversTheStep) {
  const std::string path = std::string(MN_SOURCE_DIR) + "/bench/results/2026-12-02-ptxas-sm90.txt";
  const std::string text = read(path);
  ASSERT_FALSE(text.empty()) << path;
  const auto t = gm::parse_ptxas(text);
  for (bool bf16 : {false, true}) {
    const gm::StepResult s = gm::model_step(50, bf16, gm::Device{}, &t);
    for (const auto& k : s.kernels)
      if (k.kind == "mma") {
        EXPECT_GT(k.regs, 0) << k.name << (bf16 ? " bf16" : " tf32") << ": not in " << path
                             << "; regenerate it with tools/gpu_model_ptxas.sh";
        EXPECT_EQ(k.spills, 0) << k.name << ": ptxas spills";
        EXPECT_GT(k.instr_per_mma_compiled, 1.0) << k.name;
      }
  }
}
