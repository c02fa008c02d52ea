// The cost model of tools/gpu_model.h: per-kernel arithmetic, the Koch step's kernel list,
// the ptxas table parser (the reports: gpu_model_report.cpp). The tile constants, the shared-memory layout,
// the copy maps, the k-step count and the split rules come from kernels/mma_layout.h.
#include "tools/gpu_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "kernels/mma_layout.h"

namespace mn::gpu_model {
namespace mma = mn::kernels::mma;

// ---- Instruction costs the model cannot read from the header: warp instructions, counted
// from the loaders' code in kernels/mma_layout.h (index arithmetic, bounds tests, select,
// the copy). Used when the ptxas table has no SASS loop count for a kernel.
constexpr double kInstrDenseCopy = 6;   // DenseLoader: row/col, 2 bounds tests, select, LDGSTS
constexpr double kInstrColsElem = 9;    // ConvColsLoader: 2 adds, 2 unsigned tests, k test, offset add, 64-bit address, select, LDGSTS
constexpr double kInstrWgradDyElem = 6; // WgradDyLoader: row, m test, offset multiply-add, address, select, LDGSTS
constexpr double kInstrWgradImgElem = 9;  // WgradImgLoader: + the ntab entry (an L1 hit) and the window test
constexpr double kInstrBwdDataElem = 22;  // ConvBwdDataColsLoader: two multiply-shift divisions and remainders
constexpr double kInstrEntryLds = 1;    // the k entry from shared memory (LDS.128)
constexpr double kInstrPipeTile = 20;   // per warp per k-tile: wait, barrier, commit, the k-entry copy, loop
constexpr double kInstrKstepAddr = 2;   // per warp per k-step: fragment addresses
constexpr double kInstrEpiGemm = 8, kInstrEpiConv = 14, kInstrEpiSplit = 6;  // per accumulator

// ---- Tiles from kernels/mma_layout.h --------------------------------------------------------
template <class Cfg>
TileInfo info_of(const char* name) {
  return TileInfo{name,          Cfg::BM,     Cfg::BN,      Cfg::BK,         Cfg::WARPS_M, Cfg::WARPS_N,
                  Cfg::WARPS,    Cfg::THREADS, Cfg::STAGES, Cfg::MIN_BLOCKS, Cfg::FM,      Cfg::FN};
}
TileInfo tile_info(TileKind t) {
  switch (t) {
    case TileKind::Wide: return info_of<mma::TileWide>("Wide");
    case TileKind::Mid: return info_of<mma::TileMid>("Mid");
    default: return info_of<mma::TileBig>("Big");
  }
}
template <class Cfg>
int bytes_of(bool a, bool b) {
  if (a && b) return mma::StageLayout<Cfg, true, true>::BYTES;
  if (a) return mma::StageLayout<Cfg, true, false>::BYTES;
  if (b) return mma::StageLayout<Cfg, false, true>::BYTES;
  return mma::StageLayout<Cfg, false, false>::BYTES;
}
int stage_bytes(TileKind t, bool a, bool b) {
  switch (t) {
    case TileKind::Wide: return bytes_of<mma::TileWide>(a, b);
    case TileKind::Mid: return bytes_of<mma::TileMid>(a, b);
    default: return bytes_of<mma::TileBig>(a, b);
  }
}
template <class Cfg, bool KC, int XT, int V>
MapInfo map_of() {
  using S = typename mma::OperandTile<Cfg, KC, XT>::S;
  using M = mma::LoadMap<S::ROWS, S::COLS, V, Cfg::THREADS>;
  return MapInfo{M::PER_ROW, M::NCOL, M::STEP, M::COUNT};
}
template <class Cfg, int XT>
MapInfo map_xt(bool kc, int v) {
  if (kc) return v == 4 ? map_of<Cfg, true, XT, 4>() : map_of<Cfg, true, XT, 1>();
  return v == 4 ? map_of<Cfg, false, XT, 4>() : map_of<Cfg, false, XT, 1>();
}
template <class Cfg>
MapInfo map_cfg(bool is_a, bool kc, int v) {
  return is_a ? map_xt<Cfg, Cfg::BM>(kc, v) : map_xt<Cfg, Cfg::BN>(kc, v);
}
MapInfo load_map(TileKind t, bool is_a, bool kc, int v) {
  switch (t) {
    case TileKind::Wide: return map_cfg<mma::TileWide>(is_a, kc, v);
    case TileKind::Mid: return map_cfg<mma::TileMid>(is_a, kc, v);
    default: return map_cfg<mma::TileBig>(is_a, kc, v);
  }
}

mma::ConvGeom32 g32(const Geom& g) {
  return mma::ConvGeom32{g.N, g.C, g.H, g.W, g.K, g.R, g.S, g.P, g.Q, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw};
}
Geom from32(const mma::ConvGeom32& g) {
  return Geom{g.N, g.C, g.H, g.W, g.K, g.R, g.S, g.P, g.Q, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw};
}

// ---- keys ---------------------------------------------------------------------------------
namespace {
const char* loader_name(Loader l) {
  switch (l) {
    case Loader::ConvCols: return "ConvColsLoader";
    case Loader::WgradDy: return "WgradDyLoader";
    case Loader::WgradImg: return "WgradImgLoader";
    case Loader::BwdDataCols: return "ConvBwdDataColsLoader";
    default: return "DenseLoader";
  }
}
const char* epi_name(Epi e) {
  switch (e) {
    case Epi::ConvFwd: return "ConvFwdEpilogue";
    case Epi::Split: return "SplitEpilogue";
    default: return "GemmEpilogue";
  }
}
std::string tile_name_of(int bm, int bn, int wm, int wn, int st, int mb) {
  for (TileKind t : {TileKind::Big, TileKind::Wide, TileKind::Mid}) {
    const TileInfo i = tile_info(t);
    if (i.BM == bm && i.BN == bn && i.WARPS_M == wm && i.WARPS_N == wn && i.STAGES == st && i.MIN_BLOCKS == mb)
      return i.name;
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, "%dx%dx%dx%dx%dx%d", bm, bn, wm, wn, st, mb);
  return buf;
}
// Top-level template arguments of the first '<' ... '>' after position `from`.
std::vector<std::string> template_args(const std::string& s, size_t open) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (size_t i = open; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '<' || c == '(' || c == '[') {
      if (depth++ > 0) cur += c;
      continue;
    }
    if (c == '>' || c == ')' || c == ']') {
      if (--depth == 0) {
        out.push_back(cur);
        return out;
      }
      cur += c;
      continue;
    }
    if (c == ',' && depth == 1) {
      out.push_back(cur);
      cur.clear();
      continue;
    }
    if (depth >= 1 && !(cur.empty() && c == ' ')) cur += c;
  }
  return {};
}
std::string trim(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}
// "ns::Name<...>" -> "Name".
std::string base_name(const std::string& s) {
  const size_t lt = s.find('<');
  std::string head = s.substr(0, lt);
  const size_t c = head.rfind("::");
  return trim(c == std::string::npos ? head : head.substr(c + 2));
}
std::string loader_key(const std::string& arg) {
  const std::string b = base_name(arg);
  if (b != "DenseLoader") return b;
  const size_t lt = arg.find('<');
  const auto a = template_args(arg, lt);
  return b + "/" + (a.empty() ? std::string("?") : trim(a.back()));
}
}  // namespace

std::string key_of_demangled(const std::string& name) {
  const size_t k = name.find("mma_igemm_kernel<");
  if (k == std::string::npos) return "";
  const auto args = template_args(name, k + std::string("mma_igemm_kernel").size());
  if (args.size() < 6) return "";
  // TileCfg<BM, BN, WARPS_M, WARPS_N, STAGES, MIN_BLOCKS>
  const auto t = template_args(args[0], args[0].find('<'));
  int v[6] = {0, 0, 0, 0, 0, 1};
  for (size_t i = 0; i < t.size() && i < 6; ++i) v[i] = std::atoi(trim(t[i]).c_str());
  const std::string tile = tile_name_of(v[0], v[1], v[2], v[3], v[4], v[5]);
  const auto lay = template_args(args[1], args[1].find('<'));
  std::string l = "L=";
  for (size_t i = lay.size() >= 2 ? lay.size() - 2 : 0; i < lay.size(); ++i) l += trim(lay[i]) == "true" ? "t" : "f";
  const std::string m = trim(args[2]);
  const bool bf16 = m.find("BF16") != std::string::npos || (!m.empty() && m.back() == '1');
  return tile + (bf16 ? " bf16 " : " tf32 ") + l + " A=" + loader_key(args[3]) + " B=" + loader_key(args[4]) + " " +
         base_name(args[5]);
}

std::string launch_key(const MmaLaunch& l) {
  std::string a = loader_name(l.la), b = loader_name(l.lb);
  if (l.la == Loader::Dense) a += "/" + std::to_string(l.va);
  if (l.lb == Loader::Dense) b += "/" + std::to_string(l.vb);
  return std::string(tile_info(l.tile).name) + (l.bf16 ? " bf16 " : " tf32 ") + "L=" + (l.a_kcontig ? "t" : "f") +
         (l.b_kcontig ? "t" : "f") + " A=" + a + " B=" + b + " " + epi_name(l.epi);
}

namespace {
int int_before(const std::string& line, const std::string& what) {
  const size_t p = line.find(what);
  if (p == std::string::npos) return -1;
  size_t e = p;
  while (e > 0 && line[e - 1] == ' ') --e;
  size_t b = e;
  while (b > 0 && std::isdigit(static_cast<unsigned char>(line[b - 1]))) --b;
  return b < e ? std::atoi(line.substr(b, e - b).c_str()) : -1;
}
int field(const std::string& s, const std::string& key) {  // key with its leading space: " hmma"
  const size_t p = s.find(key + "=");
  return p == std::string::npos ? 0 : std::atoi(s.c_str() + p + key.size() + 1);
}
std::string plain_key(const std::string& name) {
  std::string k = key_of_demangled(name);
  if (!k.empty()) return k;
  // "void ns::(anonymous namespace)::f<...>(args)" -> "ns::{anon}::f" (c++filt writes
  // "(anonymous namespace)", cu++filt "<unnamed>").
  std::string s = name;
  for (const char* anon : {"(anonymous namespace)", "<unnamed>"})
    for (size_t p; (p = s.find(anon)) != std::string::npos;) s.replace(p, std::strlen(anon), "{anon}");
  if (s.rfind("void ", 0) == 0) s = s.substr(5);
  return s.substr(0, s.find_first_of("<("));
}
}  // namespace

std::map<std::string, PtxasEntry> parse_ptxas(const std::string& text) {
  std::map<std::string, PtxasEntry> out;
  std::istringstream in(text);
  std::string line, cur;
  while (std::getline(in, line)) {
    if (line.rfind("sass|", 0) == 0 || line.rfind("ptx|", 0) == 0) {
      const size_t b0 = line.find('|'), bar = line.find('|', b0 + 1);
      if (bar == std::string::npos) continue;
      PtxasEntry& e = out[plain_key(line.substr(b0 + 1, bar - b0 - 1))];
      const std::string f = " " + line.substr(bar + 1);
      e.loop_source = line.substr(0, b0);
      e.loop_instr = field(f, " loop_instr"), e.loop_hmma = field(f, " hmma"), e.loop_ldsm = field(f, " ldsm");
      e.loop_lds = field(f, " lds"), e.loop_ldgsts = field(f, " ldgsts"), e.loop_bar = field(f, " bar");
      e.inner_instr = field(f, " inner_instr"), e.inner_hmma = field(f, " inner_hmma");
      continue;
    }
    const size_t ce = line.find("Compiling entry function '");
    if (ce != std::string::npos) {
      const size_t b = ce + std::string("Compiling entry function '").size();
      const size_t e = line.rfind("' for '");
      cur = plain_key(line.substr(b, e == std::string::npos || e < b ? std::string::npos : e - b));
      out[cur];
      continue;
    }
    if (cur.empty()) continue;
    if (line.find("bytes stack frame") != std::string::npos) {
      PtxasEntry& e = out[cur];
      e.stack = std::max(0, int_before(line, "bytes stack frame"));
      e.spill_stores = std::max(0, int_before(line, "bytes spill stores"));
      e.spill_loads = std::max(0, int_before(line, "bytes spill loads"));
    } else if (line.find("Used ") != std::string::npos && line.find(" registers") != std::string::npos) {
      out[cur].regs = int_before(line, "registers");
    }
  }
  return out;
}

double compiled_instr_per_ktile(const PtxasEntry& e, double mma_per_ktile) {
  if (e.loop_instr <= 0 || e.loop_hmma <= 0) return -1;
  if (e.inner_hmma > 0 && e.inner_instr > 0) {
    const double trips = mma_per_ktile / e.inner_hmma;  // the k-steps the inner loop runs per k-tile
    return e.loop_instr + (trips - 1) * e.inner_instr;
  }
  return e.loop_instr * mma_per_ktile / e.loop_hmma;  // the loop is the k-tile (or whole k-tiles)
}

// ---- occupancy, split rules ------------------------------------------------------------------
int blocks_per_sm(TileKind t, int smem_bytes, int regs, const Device& d) {
  const TileInfo ti = tile_info(t);
  if (smem_bytes > d.smem_block_max) return 0;
  int n = std::min(d.blocks_sm, d.threads_sm / ti.THREADS);
  n = std::min(n, d.smem_sm / (smem_bytes + d.smem_reserved));
  if (regs > 0) {
    const int warp_regs = (regs * 32 + 255) / 256 * 256;  // allocated per warp in units of 256
    n = std::min(n, d.regs_sm / (warp_regs * ti.WARPS));
  }
  return n;
}

int64_t dense_split_k(int64_t M, int64_t N, int64_t K, int sms, int blocks_per_sm) {
  return mma::dense_split_k(M, N, K, int64_t(sms) * std::max(1, blocks_per_sm));
}

// ---- one implicit-GEMM launch --------------------------------------------------------------
namespace {
int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Unique bytes the block's forward-style gather (im2col columns of g, BN consecutive
// output columns) brings from L2 over its whole k loop: every channel's input rows that
// its output rows' windows cover (re-reads across r, s and neighbouring columns hit L1).
double cols_unique_bytes(const Geom& g, int bn) {
  const int64_t pq = int64_t(g.P) * g.Q;
  int64_t imgs = 1, rows = 0;
  if (bn >= pq) {
    imgs = std::min<int64_t>(g.N, cdiv(bn, pq) + 1);
    rows = g.H;
  } else {
    const int64_t out_rows = std::min<int64_t>(g.P, cdiv(bn, g.Q) + 1);
    rows = std::min<int64_t>(g.H, (out_rows - 1) * g.sh + (g.R - 1) * g.dh + 1);
  }
  return double(imgs) * g.C * rows * g.W * 4.0;
}
// Unique bytes of one k-tile (BK consecutive (n, p, q)) of the weight gradient's im2col
// rows for the block's BN rows (c, r, s): the channels those rows span, the input rows
// and columns the BK output positions' windows cover, in 32-byte sectors.
double wgrad_img_tile_bytes(const Geom& g, int bn, int bk) {
  const int rs = g.R * g.S;
  const double chans = std::min<double>(g.C, double(cdiv(bn, rs)) + 1);
  double out_rows, cols;
  if (g.Q >= bk) {
    out_rows = 1.0 + double(bk - 1) / g.Q;
    cols = std::min<double>(g.W, bk + (g.S - 1) * g.dw);
  } else {
    out_rows = double(cdiv(bk, g.Q)) + 1;
    cols = g.W;
  }
  const double in_rows = std::min<double>(g.H, (out_rows - 1) * g.sh + (g.R - 1) * g.dh + 1);
  const double row_bytes = std::ceil(cols * 4.0 / 32.0) * 32.0 + 32.0;  // sector-aligned, one straddle
  return std::min(chans * in_rows * row_bytes, double(bn) * bk * 4.0);
}
}  // namespace

KernelResult model_mma(const MmaLaunch& l, const Device& d, const std::map<std::string, PtxasEntry>* ptx) {
  const TileInfo t = tile_info(l.tile);
  KernelResult r;
  r.name = l.name;
  r.kind = "mma";
  r.tile = std::string(t.name) + " " + std::to_string(t.BM) + "x" + std::to_string(t.BN) + "x" +
           std::to_string(t.STAGES) + "st";
  r.smem = stage_bytes(l.tile, l.a_kcontig, l.b_kcontig);
  PtxasEntry pe;
  if (ptx) {
    const auto it = ptx->find(launch_key(l));
    if (it != ptx->end()) pe = it->second;
  }
  r.regs = pe.regs;
  r.spills = pe.spill_stores + pe.spill_loads;
  r.blocks_per_sm = blocks_per_sm(l.tile, r.smem, pe.regs, d);
  if (r.blocks_per_sm <= 0) {
    r.bound = "does not fit";
    r.time_us = 1e9;
    return r;
  }
  const int64_t tm = cdiv(l.M, t.BM), tn = cdiv(l.N, t.BN);
  r.blocks = tm * tn * l.gz;
  r.splits = l.gz;
  r.ktiles = cdiv(l.Kd, t.BK);
  r.wave = int64_t(d.sms) * r.blocks_per_sm;
  r.waves = int(cdiv(r.blocks, r.wave));
  r.tail_eff = double(r.blocks) / double(r.waves * r.wave);

  // Per block per k-tile: MMAs, shared-memory wavefronts, warp instructions, L2 bytes.
  const int kd = l.bf16 ? 16 : 8;                            // k of one mma.sync
  const int ks = mma::ksteps(l.bf16, t.BK);                   // k-steps per k-tile
  const double mma_warp = double(t.FM) * t.FN * ks;          // per warp per k-tile
  const double mma_blk = mma_warp * t.WARPS;
  const double frag_wf = (t.BK / 8.0) * (4.0 * t.FM + 2.0 * t.FN);  // ldmatrix.x4 = 4, LDS.32 = 1 each
  const double frag_instr = (t.BK / 8.0) * ((l.a_kcontig ? t.FM : 4.0 * t.FM) + (l.b_kcontig ? t.FN / 2.0 : 2.0 * t.FN));
  // Rounding to TF32 (one cvt per fragment register) or packing pairs to BF16x2.
  const double cvt = l.bf16 ? (t.BK / 16.0) * (4.0 * t.FM + 2.0 * t.FN) : (t.BK / 8.0) * (4.0 * t.FM + 2.0 * t.FN);
  const MapInfo ma = load_map(l.tile, true, l.a_kcontig, l.la == Loader::Dense ? l.va : 1);
  const MapInfo mb = load_map(l.tile, false, l.b_kcontig, l.lb == Loader::Dense ? l.vb : 1);
  double ld_instr = 0, ld_wf = 0;  // per warp per k-tile: loader instructions, their L1 / shared wavefronts
  const double ca = d.ca_l1_wavefront ? 1.0 : 0.0;
  auto side = [&](Loader ld, const MapInfo& m, int v) {
    const double copies = double(m.count) * m.ncol;
    switch (ld) {
      case Loader::Dense:
        ld_instr += copies * kInstrDenseCopy;
        if (v == 1) ld_wf += ca * copies;  // 4-byte cp.async.ca: an L1 read of the line
        break;
      case Loader::ConvCols:
        ld_instr += m.count * kInstrEntryLds + copies * kInstrColsElem;
        ld_wf += m.count + ca * copies;  // a broadcast k-entry load per row, an L1 read per copy
        break;
      case Loader::BwdDataCols:
        ld_instr += m.count * kInstrEntryLds + copies * kInstrBwdDataElem;
        ld_wf += m.count + ca * copies;
        break;
      case Loader::WgradDy:
        ld_instr += kInstrEntryLds + copies * kInstrWgradDyElem;
        ld_wf += 4 + ca * copies;  // the lane's own k entry: 32 x 16 bytes = 4 wavefronts
        break;
      case Loader::WgradImg:
        ld_instr += kInstrEntryLds + copies * kInstrWgradImgElem;
        ld_wf += 4 + (1 + ca) * copies;  // + the row's ntab entry (a broadcast L1 hit) per copy
        break;
    }
  };
  side(l.la, ma, l.va);
  side(l.lb, mb, l.vb);
  const double instr_warp_model = mma_warp + frag_instr + cvt + ks * kInstrKstepAddr + ld_instr + kInstrPipeTile;
  r.instr_per_mma = instr_warp_model / mma_warp;
  double instr_warp = instr_warp_model;
  if (const double c = compiled_instr_per_ktile(pe, mma_warp); c > 0) {
    r.instr_per_mma_compiled = c / mma_warp;
    r.compiled_source = pe.loop_source;
    // SASS is what the schedulers issue; PTX is counted before ptxas folds the shared-memory
    // addresses into the instructions' offsets (about twice the SASS in the k-step loop:
    // shown, not used for the time).
    if (pe.loop_source == "sass" || d.issue_from_ptx) instr_warp = c;
  }
  const double write_wf = (double(t.BM) + t.BN) * t.BK * 4.0 / d.smem_bytes_clk + (l.ktable ? t.BK * 16.0 / 128.0 : 0);
  const double smem_blk = t.WARPS * (frag_wf + ld_wf) + write_wf;
  r.smem_bytes_per_mma = smem_blk * 128.0 / mma_blk;

  // L2 -> SM bytes of the whole launch.
  double l2_in = 0;
  const double kd_all = double(l.Kd) * l.gz;
  auto l2_side = [&](Loader ld, bool is_a) {
    switch (ld) {
      case Loader::Dense:
        l2_in += (is_a ? double(tn) * l.M : double(tm) * l.N) * kd_all * 4.0;
        break;
      case Loader::ConvCols:
      case Loader::BwdDataCols:
        l2_in += double(r.blocks) * (l.has_geom ? cols_unique_bytes(l.g, t.BN) : double(t.BN) * l.Kd * 4.0);
        break;
      case Loader::WgradDy:
        l2_in += double(tn) * l.M * kd_all * 4.0;
        break;
      case Loader::WgradImg:
        l2_in += double(r.blocks) * r.ktiles *
                 (l.has_geom ? wgrad_img_tile_bytes(l.g, t.BN, t.BK) : double(t.BN) * t.BK * 4.0);
        break;
    }
  };
  l2_side(l.la, true);
  l2_side(l.lb, false);
  if (l.ktable) l2_in += double(r.blocks) * r.ktiles * t.BK * 16.0 + double(r.blocks) * t.BN * 16.0;
  const double l2_blk_tile = l2_in / (double(r.blocks) * r.ktiles);
  const double out_bytes = double(l.M) * l.N * l.gz * 4.0;
  const double epi_blk_bytes = out_bytes / double(r.blocks);
  const double epi_cost = l.epi == Epi::ConvFwd ? kInstrEpiConv + (l.bias ? 1 : 0) + (l.relu ? 1 : 0)
                                                : (l.epi == Epi::Split ? kInstrEpiSplit : kInstrEpiGemm);
  const double epi_instr_blk = double(t.FM) * t.FN * 4.0 * epi_cost * t.WARPS;

  // Time: full waves with blocks_per_sm blocks on every SM, then the tail.
  const double rate = (l.bf16 ? d.bf16_fma_clk_sm : d.tf32_fma_clk_sm) * d.mma_sync_frac / (16.0 * 8.0 * kd);  // MMAs / clk / SM
  const double l2_clk_total = d.l2_tbs * 1e12 / (d.clock_ghz * 1e9);
  double comp[4] = {0, 0, 0, 0};  // clocks spent bound by MMA, smem, issue, L2 (the round's maximum)
  double lat_clk = 0, epi_clk = 0, total_clk = 0;
  // A wave of `active` blocks, j on the busiest SM: that SM's share of L2 is j / active of it.
  auto wave_time = [&](int j, int64_t active, double weight) {
    const double eff = j >= 2 ? 1.0 : d.one_block_eff;
    const double port = std::min(d.l2_port_bytes_clk, l2_clk_total * j / double(active));  // that SM's L2 bytes / clk
    const double c_mma = j * mma_blk / (rate * eff), c_smem = j * smem_blk, c_issue = j * instr_warp * t.WARPS / d.issue_clk,
                 c_l2 = j * l2_blk_tile / port;
    const double c[4] = {c_mma, c_smem, c_issue, c_l2};
    double round = *std::max_element(c, c + 4);
    const double cover = d.latency_clk / std::max(1, t.STAGES - 1);
    const double ktiles = double(r.ktiles);
    for (int i = 0; i < 4; ++i) comp[i] += weight * ktiles * c[i];
    if (cover > round) {
      lat_clk += weight * ktiles * (cover - round);
      round = cover;
    }
    const double epi = std::max(j * epi_instr_blk / d.issue_clk, j * epi_blk_bytes / port);
    epi_clk += weight * epi;
    total_clk += weight * (2 * d.latency_clk + ktiles * round / d.overlap_eff + epi);
  };
  const int64_t full = r.blocks / r.wave, rem = r.blocks % r.wave;
  if (full > 0) wave_time(r.blocks_per_sm, r.wave, double(full));
  if (rem > 0) wave_time(int(cdiv(rem, d.sms)), rem, 1.0);
  const double us_per_clk = 1e-3 / d.clock_ghz;
  r.t_mma_us = comp[0] * us_per_clk, r.t_smem_us = comp[1] * us_per_clk, r.t_issue_us = comp[2] * us_per_clk;
  r.t_l2_us = comp[3] * us_per_clk;
  r.hbm_bytes = l.hbm_bytes;
  r.t_hbm_us = l.hbm_bytes / (d.hbm_tbs * d.hbm_eff * 1e12) * 1e6;
  const double sm_us = total_clk * us_per_clk;
  r.time_us = std::max(sm_us, r.t_hbm_us);
  const char* names[4] = {"mma", "smem", "issue", "l2"};
  const int arg = int(std::max_element(comp, comp + 4) - comp);
  r.bound = r.t_hbm_us >= sm_us ? "hbm" : (lat_clk > comp[arg] ? "latency" : names[arg]);
  r.mmas = mma_blk * double(r.blocks) * r.ktiles;
  r.flops = 2.0 * double(l.M) * l.N * kd_all;
  return r;
}

KernelResult model_mem(const std::string& name, double bytes, int launches, const Device& d) {
  KernelResult r;
  r.name = name;
  r.kind = "mem";
  r.launches = std::max(1, launches);
  r.hbm_bytes = bytes;
  const double per = bytes / r.launches;
  const bool in_l2 = per <= 0.5 * d.l2_mb * 1e6;
  const double bw = (in_l2 ? d.l2_tbs : d.hbm_tbs) * d.hbm_eff * 1e12;
  r.t_hbm_us = bytes / bw * 1e6;
  r.time_us = std::max(r.launches * d.min_kernel_us, r.t_hbm_us);
  r.bound = r.time_us > r.t_hbm_us ? "launch floor" : (in_l2 ? "l2" : "hbm");
  return r;
}

KernelResult model_mem_list(const std::string& name, const std::vector<double>& bytes, const Device& d) {
  KernelResult r;
  r.name = name;
  r.kind = "mem";
  r.launches = int(bytes.size());
  double t = 0, hbm = 0;
  bool any_hbm = false, floor = true;
  for (double b : bytes) {
    const KernelResult one = model_mem(name, b, 1, d);
    t += one.time_us, hbm += one.t_hbm_us, r.hbm_bytes += b;
    any_hbm = any_hbm || one.bound == "hbm";
    floor = floor && one.bound == "launch floor";
  }
  r.time_us = t, r.t_hbm_us = hbm;
  r.bound = floor ? "launch floor" : (any_hbm ? "hbm" : "l2");
  return r;
}

// ---- the Koch step -----------------------------------------------------------------------
namespace {
struct StepBuilder {
  const Device& d;
  const std::map<std::string, PtxasEntry>* ptx;
  bool bf16;
  std::vector<KernelResult> ks;

  void mem(const std::string& name, double bytes, int launches = 1) { ks.push_back(model_mem(name, bytes, launches, d)); }
  void mem_list(const std::string& name, const std::vector<double>& bytes) { ks.push_back(model_mem_list(name, bytes, d)); }
  void mma(const MmaLaunch& l) { ks.push_back(model_mma(l, d, ptx)); }

  // mma_conv.cu forward_math: Wide when K <= 64, else Big; 16-byte weight copies when C R S % 4 == 0.
  void conv_forward(const std::string& name, const Geom& g, bool relu, bool bias) {
    MmaLaunch l;
    l.name = name;
    l.tile = g.K <= 64 ? TileKind::Wide : TileKind::Big;
    l.bf16 = bf16;
    l.la = Loader::Dense, l.lb = Loader::ConvCols;
    l.va = (g.C * g.R * g.S) % 4 == 0 ? 4 : 1;
    l.a_kcontig = true, l.b_kcontig = false;
    l.epi = Epi::ConvFwd, l.relu = relu, l.bias = bias;
    l.M = g.K, l.N = int64_t(g.N) * g.P * g.Q, l.Kd = int64_t(g.C) * g.R * g.S;
    l.has_geom = true, l.g = g, l.ktable = true;
    l.hbm_bytes = 4.0 * (double(g.N) * g.C * g.H * g.W + double(g.K) * l.Kd + double(l.M) * l.N) + 16.0 * (l.Kd + l.N);
    mma(l);
  }
  // mma_conv.cu mma_conv_backward_data_cuda: stride 1 runs as the forward of dy with the
  // weights flipped and transposed (a small kernel first); otherwise the strided gather.
  void conv_backward_data(const std::string& name, const Geom& g) {
    const double wbytes = 4.0 * g.K * g.C * g.R * g.S;
    mem(name + " weights transposed", 2 * wbytes);
    const mma::ConvGeom32 c = g32(g);
    if (mma::bwd_data_as_forward(c)) {
      conv_forward(name, from32(mma::bwd_data_forward_geometry(c)), false, false);
      return;
    }
    MmaLaunch l;
    l.name = name + " (strided)";
    l.tile = TileKind::Big;
    l.bf16 = bf16;
    l.la = Loader::Dense, l.lb = Loader::BwdDataCols, l.va = 1;
    l.a_kcontig = true, l.b_kcontig = false, l.epi = Epi::ConvFwd;
    l.M = g.C, l.N = int64_t(g.N) * g.H * g.W, l.Kd = int64_t(g.K) * g.R * g.S;
    l.has_geom = true, l.g = g, l.ktable = true;
    l.hbm_bytes = 4.0 * (double(g.N) * g.K * g.P * g.Q + wbytes / 4 + double(l.M) * l.N) + 16.0 * (l.Kd + l.N);
    mma(l);
  }
  // mma_conv.cu backward_weight_cfg: Mid when K <= 64, else Big; N P Q split so the blocks
  // fill whole waves (wave_fit_k_per_split over SMs x this kernel's blocks per SM), then
  // sum_partials when there is more than one split.
  void conv_backward_weight(const std::string& name, const Geom& g) {
    MmaLaunch l;
    l.name = name;
    l.tile = g.K <= 64 ? TileKind::Mid : TileKind::Big;
    l.bf16 = bf16;
    l.la = Loader::WgradDy, l.lb = Loader::WgradImg;
    l.a_kcontig = true, l.b_kcontig = true, l.epi = Epi::Split;
    l.M = g.K, l.N = int64_t(g.C) * g.R * g.S;
    const int64_t kd = int64_t(g.N) * g.P * g.Q;
    const TileInfo t = tile_info(l.tile);
    const int64_t tiles = cdiv(l.M, t.BM) * cdiv(l.N, t.BN);
    int regs = -1;
    if (ptx) {
      const auto it = ptx->find(launch_key(l));
      if (it != ptx->end()) regs = it->second.regs;
    }
    const int64_t wave = int64_t(d.sms) * blocks_per_sm(l.tile, stage_bytes(l.tile, true, true), regs, d);
    const int k_per_z = mma::wave_fit_k_per_split(int(kd), tiles, wave, t.BK);
    const int64_t splits = cdiv(kd, k_per_z);
    l.Kd = splits > 1 ? k_per_z : kd;
    l.gz = splits;
    l.has_geom = true, l.g = g, l.ktable = true;
    const double out = double(l.M) * l.N * 4.0;
    l.hbm_bytes = 4.0 * (double(g.N) * g.C * g.H * g.W + double(g.N) * g.K * g.P * g.Q) + out * double(splits) +
                  16.0 * (kd + l.N);
    mma(l);
    if (splits > 1) mem(name + " sum_partials (" + std::to_string(splits) + " splits)", out * double(splits + 1));
  }
  // gemm.cu gemm_cuda_impl -> mma_gemm.cu: 128 x 128 tiles, layout <!TA, TB>, 16-byte
  // copies (every Koch extent is a multiple of 4); split-K (a batched launch over K
  // slices into partials, then gemm_sum_splits) when split_k_count says so, with the 2
  // blocks per SM gemm.cu passes for the mma.sync kernel.
  void gemm(const std::string& name, bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
    const int64_t s = dense_split_k(M, N, K, d.sms, 2);
    MmaLaunch l;
    l.name = name + (s > 1 ? " (split-K " + std::to_string(s) + ")" : "");
    l.tile = TileKind::Big;
    l.bf16 = bf16;
    l.la = l.lb = Loader::Dense, l.va = l.vb = 4;
    l.a_kcontig = !ta, l.b_kcontig = tb, l.epi = Epi::Gemm;
    l.M = M, l.N = N, l.Kd = K / s, l.gz = s;
    l.hbm_bytes = 4.0 * (double(M) * K + double(K) * N + double(M) * N * s);
    mma(l);
    if (s > 1) mem(name + " gemm_sum_splits", 4.0 * double(M) * N * (s + 1));
  }
};

Geom layer_geom(int i, int n) {
  static const int C[4] = {1, 64, 128, 128}, K[4] = {64, 128, 128, 256}, H[4] = {105, 48, 21, 9},
                   R[4] = {10, 7, 4, 4};
  Geom g;
  g.N = n, g.C = C[i], g.H = g.W = H[i], g.K = K[i], g.R = g.S = R[i];
  g.P = g.Q = H[i] - R[i] + 1;
  return g;
}
}  // namespace

double target_ms(int triplets, bool bf16) { return triplets == 50 ? (bf16 ? 5.0 : 8.0) : 0.0; }

StepResult model_step(int triplets, bool bf16, const Device& d, const std::map<std::string, PtxasEntry>* ptx) {
  const int n = 3 * triplets;  // anchors, positives and negatives as one batch
  StepBuilder b{d, ptx, bf16, {}};
  const double f = 4.0;
  const int64_t emb = 4096, flat = 9216;
  // Parameters per layer: weight, bias.
  double wts[5], bias[5];
  for (int i = 0; i < 4; ++i) {
    const Geom g = layer_geom(i, n);
    wts[i] = double(g.K) * g.C * g.R * g.S, bias[i] = g.K;
  }
  wts[4] = double(flat) * emb, bias[4] = double(emb);
  double total_params = 0;
  std::vector<double> fills;
  for (int i = 0; i < 5; ++i) {
    total_params += wts[i] + bias[i];
    fills.push_back(wts[i] * f), fills.push_back(bias[i] * f);
  }
  // A leaf gradient accumulates into .grad (zeroed, so defined): axpy reads both, writes one.
  auto axpy = [&](int i) { return std::vector<double>{3.0 * wts[i] * f, 3.0 * bias[i] * f}; };

  // ---- forward
  b.mem("concat a, p, n", 2.0 * n * 105 * 105 * f, 3);
  for (int i = 0; i < 4; ++i) {
    const Geom g = layer_geom(i, n);
    const std::string L = "conv" + std::to_string(i + 1);
    b.conv_forward(L + " fwd (+bias, ReLU)", g, true, true);
    if (i < 3) {
      const double out = double(n) * g.K * g.P * g.Q;
      b.mem(L + " max-pool fwd", out * f + out / 4 * (f + 4));  // reads r, writes y and the int32 argmax
    }
  }
  b.gemm("dense fwd", false, true, n, emb, flat);
  b.mem("dense bias add + sigmoid", 2 * 2.0 * n * emb * f, 2);
  b.mem("global loss fwd/bwd + narrow/concat glue", 10.0 * n * emb * f, 10);
  // ---- backward
  b.mem("sigmoid bwd", 3.0 * n * emb * f);
  b.gemm("dense dX", false, false, n, flat, emb);
  b.gemm("dense dW", true, false, emb, flat, n);
  b.mem("dense db (sum_rows)", double(n) * emb * f);
  b.mem_list("dense grad accumulate (axpy w, b)", axpy(4));
  for (int i = 3; i >= 0; --i) {
    const Geom g = layer_geom(i, n);
    const std::string L = "conv" + std::to_string(i + 1);
    const double out = double(n) * g.K * g.P * g.Q;
    if (i == 3) b.mem(L + " ReLU bwd", 3.0 * out * f);
    else b.mem(L + " max-pool+ReLU bwd", 3.0 * out / 4 * f + out * f);  // dy, y, argmax -> dx
    if (i > 0) b.conv_backward_data(L + " dX", g);
    b.conv_backward_weight(L + " dW", g);
    const int64_t splits = std::max<int64_t>(1, std::min<int64_t>(g.N, 1024 / g.K));
    const int64_t per = cdiv(g.N, splits), used = cdiv(g.N, per);
    b.mem(L + " db", out * f, used > 1 ? 2 : 1);
    b.mem_list(L + " grad accumulate (axpy w, b)", axpy(i));
  }
  b.mem("Adam (one launch, all groups)", 7.0 * total_params * f, 1);
  b.mem_list("zero_grad (fills)", fills);

  StepResult s;
  s.triplets = triplets;
  s.bf16 = bf16;
  s.kernels = b.ks;
  for (const auto& k : s.kernels) {
    s.gpu_us += k.time_us;
    s.launches += k.launches;
    const bool gemm = k.kind == "mma" || k.name.find("sum_partials") != std::string::npos ||
                      k.name.find("gemm_sum_splits") != std::string::npos;
    (gemm ? s.gemm_us : s.other_us) += k.time_us;
  }
  const double gaps = s.launches * d.gap_us;
  s.graph_ms = (s.gpu_us + gaps) / 1e3;
  s.eager_ms = std::max(s.gpu_us + gaps, s.launches * d.host_launch_us) / 1e3;
  return s;
}

}  // namespace mn::gpu_model
