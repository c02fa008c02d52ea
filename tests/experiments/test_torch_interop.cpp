// PyTorch interop (tools/load_in_torch.py, docs/checkpoints.md): tiny metric_train runs
// (conv4 on grey and on RGB inverted images, MLP, embedding-net), omniglot_triplet runs
// (conv4 with LRN, pool batch-norm, ELU, sigmoid and a disjoint anchor branch; Koch's
// branch with LRN and batch-norm) and an omniglot_siamese run (conv4 and Koch's head) are
// loaded in PyTorch with the tool, the same image files (grey PNGs and colour BMPs of other
// sizes) are prepared by its preprocessing and embedded by the torch module: the inputs
// must equal ours element by element and the embeddings (metric_embed's, or the trunk's
// here for Omniglot) must match within 1e-4. Also --export-weights: a file with the
// model's tensors and metadata only, which metric_embed, --evaluate and the tool read
// like the checkpoint. The PyTorch parts skip when /usr/bin/python3 lacks torch or numpy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "autograd/variable.h"
#include "data/image_folder.h"
#include "data/image_io.h"
#include "data/loader.h"
#include "data/transforms.h"
#include "experiments/common/harness.h"
#include "experiments/metric/embed.h"
#include "experiments/metric/folder_study.h"
#include "kernels/elementwise.h"
#include "nn/checkpoint.h"
#include "nn/models/conv4.h"
#include "nn/models/koch_branch.h"
#include "tests/common/image_folder_fixture.h"
#include "tests/experiments/metric_fixture.h"
#include "tests/experiments/omniglot_fixture.h"

namespace {
using namespace mn;
using namespace mn::exp;
using mn_test_exp::omniglot_root;
using mn_test_exp::read_text;
using mn_test_exp::TempDir;
using mn_test_exp::operator+;
namespace fs = std::filesystem;

bool have_torch() {
  static const bool ok = std::system("/usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1") == 0;
  return ok;
}
#define MN_SKIP_WITHOUT_TORCH()                                                                                  \
  if (!have_torch())                                                                                             \
  GTEST_SKIP() << "/usr/bin/python3 cannot import torch and numpy (apt-get install python3-torch python3-numpy, " \
                  "or tools/install-deps.sh --bench): the PyTorch interop check is skipped"

int train(const std::vector<std::string>& args) { return mn_test_exp::metric_train(args); }
int embed(const std::vector<std::string>& args) { return mn_test_exp::metric_embed(args); }

// A 24-bit BMP (bottom-up BGR rows padded to 4 bytes) of random colours, w x h.
void write_bmp(const std::string& path, int w, int h, unsigned seed) {
  std::mt19937 rng(seed);
  const int stride = (3 * w + 3) & ~3;
  std::vector<uint8_t> b(54 + size_t(stride) * size_t(h), 0);
  auto put32 = [&](size_t at, uint32_t v) { std::memcpy(&b[at], &v, 4); };
  b[0] = 'B', b[1] = 'M';
  put32(2, uint32_t(b.size())), put32(10, 54), put32(14, 40), put32(18, uint32_t(w)), put32(22, uint32_t(h));
  b[26] = 1, b[28] = 24;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < 3 * w; ++x) b[54 + size_t(y) * size_t(stride) + size_t(x)] = uint8_t(rng() & 255);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

// 6 classes of 3 grey 40x40 PNGs (the fixture's bars) and one colour 37x29 BMP each: the
// box resize to any --image-size has fractional covers, and colour goes through the luma.
void make_folder(const std::string& root) {
  test::make_image_folder(root, 6, 3, 40, 9);
  for (int c = 0; c < 6; ++c) write_bmp(root + "/class" + std::to_string(10 + c) + "/colour.bmp", 37, 29, 100 + c);
}

std::vector<std::string> tiny(const std::string& data, const std::string& out) {
  return {"--data-dir", data, "--out-dir", out, "--device", "cpu", "--cache-dir", "none", "--embedding", "8",
          "--classes-per-batch", "3", "--per-class", "2", "--iters", "3", "--epochs", "1", "--val-classes", "0.34",
          "--test-classes", "0", "--one-shot-way", "2", "--one-shot-tasks", "10", "--loss", "schroff", "--miner",
          "semi-hard-or-hardest", "--lr", "0.01"};
}

// The comparison: load CKPT with the tool, embed the listed files (metric_embed's
// <out>.files.txt: name TAB class, relative to ROOT) with its preprocessing, compare
// with REF.npy; also PIL and the tool's own decoders agree, and an array in equals its file.
const char* kScript = R"PY(
import os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "tools"))
if sys.argv[2] == "nopil":
    sys.modules["PIL"] = None  # the tool must import and decode PNG / BMP without PIL
import numpy as np, torch
import load_in_torch as lt
ckpt, listing, root, ref, out, branch, inputs = sys.argv[3:10]
model, info = lt.load(ckpt, None if branch == "-" else branch)
assert not model.training
files = [os.path.join(root, l.rstrip("\n").split("\t")[0]) for l in open(listing) if l.strip()]
e = lt.embed(model, files, info, batch=7)
r = np.load(ref)
assert e.shape == r.shape, (e.shape, r.shape)
d = float(np.abs(e.astype(np.float64) - r.astype(np.float64)).max())
di = -1.0  # the network inputs: ours and the tool's preprocessing, element by element
if inputs != "-":
    x, xi = lt.preprocess(files, info).reshape(len(files), -1).numpy(), np.load(inputs)
    assert x.shape == xi.shape, (x.shape, xi.shape)
    di = float(np.abs(x.astype(np.float64) - xi).max())
if lt.Image is not None:
    for f in files:
        assert np.array_equal(lt.decode(f, True), lt.decode(f, False)), f
px = lt.decode(files[-1])
assert torch.equal(lt.preprocess(px, info), lt.preprocess(files[-1], info))
opt = sum(1 for k in info["ignored"] if k.startswith("optim."))
head = info["head"] is not None  # omniglot_siamese: Koch's head, as the file holds it
if head:
    assert torch.equal(info["head"].weight.detach(), torch.from_numpy(lt.read_safetensors(ckpt)[0]["head.weight"]))
open(out, "w").write("%.9g %.9g %d %d %s %d\n" % (d, di, len(info["ignored"]), opt,
                                                 "pil" if lt.Image is not None else "nopil", head))
)PY";

struct Interop {
  double max_diff = 1e9, input_diff = 1e9;
  int ignored = -1, optimizer = -1, head = -1;
  std::string decoder;
};

Interop torch_compare(const std::string& work, const std::string& ckpt, const std::string& listing,
                      const std::string& root, const std::string& ref, const std::string& what, bool pil = true,
                      const std::string& branch = "-", const std::string& inputs = "-") {
  const std::string script = work + "/interop.py", out = work + "/interop.txt", log = work + "/interop.log";
  std::ofstream(script) << kScript;
  const std::string cmd = "/usr/bin/python3 " + script + " " MN_SOURCE_DIR " " + (pil ? "pil" : "nopil") + " " +
                          ckpt + " " + listing + " '" + root + "' " + ref + " " + out + " " + branch + " " + inputs +
                          " > " + log + " 2>&1";
  Interop r;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << what << ":\n" << read_text(log);
  std::istringstream in(read_text(out));
  in >> r.max_diff >> r.input_diff >> r.ignored >> r.optimizer >> r.decoder >> r.head;
  std::printf("[ interop  ] %s: max |torch - ours| = %.3g (decoder %s%s)\n", what.c_str(), r.max_diff,
              r.decoder.c_str(), inputs == "-" ? "" : r.input_diff == 0 ? ", inputs identical" : ", INPUTS DIFFER");
  EXPECT_LT(r.max_diff, 1e-4) << what;
  if (inputs != "-") {
    EXPECT_EQ(r.input_diff, 0.0) << what << ": the tool's preprocessing is not ours";
  }
  return r;
}

void write_npy(const std::string& path, const Tensor& e) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(e.size(0)) + ", " +
                       std::to_string(e.size(1)) + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream o(path, std::ios::binary);
  o.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  o.write(reinterpret_cast<const char*>(&len), 2);
  o << header;
  const Tensor c = e.contiguous();
  o.write(reinterpret_cast<const char*>(c.data<float>()), static_cast<std::streamsize>(c.numel() * 4));
}

// Our network inputs for the folder (metric_embed's order), (N, C S S), as `path`.
void folder_inputs_npy(const std::string& root, const std::string& path, int channels, int size, bool invert) {
  data::FolderLoadOptions o;
  o.channels = channels, o.image_size = size;
  const data::FolderDataset ds = data::load_image_folder(root, o);
  const Tensor x = folder_inputs(ds.images, invert, Device::cpu());
  write_npy(path, x.reshape({x.size(0), x.numel() / x.size(0)}));
}

// Trains a tiny metric_train run with `extra` flags and embeds the folder with metric_embed.
void train_and_embed(const std::string& data, const std::string& out, const std::vector<std::string>& extra) {
  testing::internal::CaptureStdout();  // the runs' reports: only the comparisons are shown
  const int trained = train(tiny(data, out) + extra);
  const int embedded = trained == kExitOk ? embed({"--checkpoint", out + "/best.safetensors", "--images", data, "--out",
                                                  out + "/e.npy", "--cache-dir", "none"})
                                          : -1;
  const std::string said = testing::internal::GetCapturedStdout();
  ASSERT_EQ(trained, kExitOk) << said;
  ASSERT_EQ(embedded, 0) << said;
}

TEST(TorchInterop, MetricTrainConv4GreyAndRgbInverted) {
  MN_SKIP_WITHOUT_TORCH();
  TempDir data("ti_folder"), grey("ti_grey"), rgb("ti_rgb");
  make_folder(data.str());
  // 32x32: the last block's map is 2x2, so the flatten order counts.
  train_and_embed(data.str(), grey.str(), {"--trunk", "conv4", "--image-size", "32", "--width", "8"});
  folder_inputs_npy(data.str(), grey / "x.npy", 1, 32, false);
  torch_compare(grey.str(), grey / "best.safetensors", grey / "e.npy.files.txt", data.str(), grey / "e.npy",
                "metric_train conv4, 1 channel", true, "-", grey / "x.npy");
  // last.safetensors holds the optimizer state too: the tool leaves it out.
  const Interop last = torch_compare(grey.str(), grey / "last.safetensors", grey / "e.npy.files.txt", data.str(),
                                     grey / "e.npy", "metric_train conv4, 1 channel, last.safetensors");
  EXPECT_GT(last.optimizer, 0);
  EXPECT_EQ(last.ignored, last.optimizer);
  train_and_embed(data.str(), rgb.str(),
                  {"--trunk", "conv4", "--channels", "3", "--invert", "--image-size", "20", "--width", "8"});
  folder_inputs_npy(data.str(), rgb / "x.npy", 3, 20, true);
  torch_compare(rgb.str(), rgb / "best.safetensors", rgb / "e.npy.files.txt", data.str(), rgb / "e.npy",
                "metric_train conv4, 3 channels, --invert", true, "-", rgb / "x.npy");
}

TEST(TorchInterop, MetricTrainMlpAndEmbeddingNetAlsoWithoutPil) {
  MN_SKIP_WITHOUT_TORCH();
  TempDir data("ti_folder2"), mlp("ti_mlp"), en("ti_en");
  make_folder(data.str());
  train_and_embed(data.str(), mlp.str(), {"--trunk", "mlp", "--image-size", "12", "--hidden", "16"});
  torch_compare(mlp.str(), mlp / "best.safetensors", mlp / "e.npy.files.txt", data.str(), mlp / "e.npy",
                "metric_train mlp");
  folder_inputs_npy(data.str(), mlp / "x.npy", 1, 12, false);
  const Interop nopil = torch_compare(mlp.str(), mlp / "best.safetensors", mlp / "e.npy.files.txt", data.str(),
                                      mlp / "e.npy", "metric_train mlp, PIL hidden", /*pil=*/false, "-",
                                      mlp / "x.npy");
  EXPECT_EQ(nopil.decoder, "nopil");
  train_and_embed(data.str(), en.str(), {"--trunk", "embedding-net", "--image-size", "17", "--hidden", "16",
                                         "--channels", "3"});
  folder_inputs_npy(data.str(), en / "x.npy", 3, 17, false);
  torch_compare(en.str(), en / "best.safetensors", en / "e.npy.files.txt", data.str(), en / "e.npy",
                "metric_train embedding-net, 3 channels", true, "-", en / "x.npy");
}

TEST(TorchInterop, ExportWeightsWritesTheModelTensorsOnly) {
  TempDir data("ti_folder3"), out("ti_export"), eval("ti_eval");
  make_folder(data.str());
  testing::internal::CaptureStdout();
  const int trained = train(tiny(data.str(), out.str()) + std::vector<std::string>{"--image-size", "16", "--width",
                                                                                    "8"});
  const std::string report = testing::internal::GetCapturedStdout();
  ASSERT_EQ(trained, kExitOk) << report;
  const std::string last = out / "last.safetensors", w = out / "weights.safetensors";
  // No data, no device, nothing else: the checkpoint alone.
  testing::internal::CaptureStdout();
  const int exported = train({"--evaluate", last, "--export-weights", w});
  const std::string said = testing::internal::GetCapturedStdout();
  ASSERT_EQ(exported, kExitOk) << said;
  EXPECT_NE(said.find("optimizer tensors left out"), std::string::npos) << said;
  EXPECT_FALSE(fs::exists(out / "evaluation.json"));
  const nn::SafetensorsFile src = nn::read_safetensors(last), dst = nn::read_safetensors(w);
  const std::map<std::string, Shape> best = nn::read_safetensors_shapes(out / "best.safetensors");  // model only
  std::set<std::string> want, got;
  for (const auto& [k, s] : best) want.insert(k);
  for (const auto& [k, t] : dst.tensors) {
    got.insert(k);
    EXPECT_EQ(t.to_vector<float>(), src.tensors.at(k).to_vector<float>()) << k;
  }
  EXPECT_EQ(got, want);
  EXPECT_GT(src.tensors.size(), dst.tensors.size());
  EXPECT_EQ(dst.metadata.at("study"), "metric_train");
  EXPECT_EQ(dst.metadata.at("config"), src.metadata.at("config"));
  EXPECT_EQ(dst.metadata.at("weights_only"), "true");
  EXPECT_EQ(dst.metadata.count("optimizer"), 0u);
  EXPECT_EQ(dst.metadata.count("rng.sample.seed"), 0u);
  // metric_embed and --evaluate read it like the checkpoint.
  testing::internal::CaptureStdout();
  const int a = embed({"--checkpoint", last, "--images", data.str(), "--out", out / "a.npy", "--cache-dir", "none"});
  const int b = embed({"--checkpoint", w, "--images", data.str(), "--out", out / "b.npy", "--cache-dir", "none"});
  const int evaluated = train(tiny(data.str(), eval.str()) + std::vector<std::string>{"--evaluate", w});
  const std::string runs = testing::internal::GetCapturedStdout();
  ASSERT_EQ(a, 0) << runs;
  ASSERT_EQ(b, 0) << runs;
  EXPECT_EQ(read_text(out / "a.npy"), read_text(out / "b.npy"));
  EXPECT_EQ(evaluated, kExitOk) << runs;
  EXPECT_TRUE(fs::exists(eval / "evaluation.json"));
  // Errors name the flag and the file.
  testing::internal::CaptureStderr();
  EXPECT_EQ(train({"--export-weights", w}), kExitUsage);
  EXPECT_EQ(train({"--evaluate", last, "--export-weights", out / "w.bin"}), kExitUsage);
  EXPECT_EQ(train({"--evaluate", last, "--export-weights", last}), kExitUsage);
  EXPECT_EQ(train({"--evaluate", last, "--export-weights", out / "no/such/dir/w.safetensors"}), kExitFailed);
  const std::string err = testing::internal::GetCapturedStderr();
  for (const std::string& s : {std::string("--export-weights needs --evaluate"), "'" + out / "w.bin" +
                               "': name the file *.safetensors", std::string("is the checkpoint given to --evaluate"),
                               "--export-weights '" + out / "no/such/dir/w.safetensors" + "'"})
    EXPECT_NE(err.find(s), std::string::npos) << s << "\n" << err;
  if (!have_torch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch and numpy: the PyTorch part is skipped";
  torch_compare(out.str(), w, out / "a.npy.files.txt", data.str(), out / "a.npy", "--export-weights file");
}

// ---------------------------------------------------------------- Omniglot --

// 14 evaluation images (105x105 PNGs), their absolute paths listed in `listing`.
std::vector<std::string> omniglot_files(const std::string& listing) {
  std::vector<std::string> all;
  for (const auto& e : fs::recursive_directory_iterator(omniglot_root() + "/images_evaluation"))
    if (e.is_regular_file() && e.path().extension() == ".png") all.push_back(e.path().string());
  std::sort(all.begin(), all.end());
  std::vector<std::string> pick;
  for (size_t i = 0; i < all.size() && pick.size() < 14; i += 7) pick.push_back(all[i]);
  std::ofstream o(listing);
  for (const auto& p : pick) o << p << "\n";
  return pick;
}

// Our embeddings of `files` by `trunk` loaded from the checkpoint's "<prefix>*" tensors, with
// the Omniglot studies' preprocessing (grey, area resize, ink 1, x 255 without --input-norm).
Tensor omniglot_reference(nn::Module& trunk, const std::string& ckpt, const std::string& prefix,
                          const std::vector<std::string>& files, int64_t S, bool input_norm,
                          const std::string& inputs_npy) {
  const nn::SafetensorsFile f = nn::read_safetensors(ckpt);
  for (auto& [name, v] : trunk.named_parameters()) {
    Tensor d = v.data();
    d.copy_(f.tensors.at(prefix + name));
  }
  for (auto& [name, b] : trunk.named_buffers())
    if (b->defined()) b->copy_(f.tensors.at(prefix + name));
  const int64_t n = static_cast<int64_t>(files.size());
  Tensor u8 = Tensor::empty({n, 105, 105}, DType::U8);
  for (int64_t i = 0; i < n; ++i) {
    const data::GrayImage g = data::read_gray_image(files[size_t(i)]);
    std::memcpy(u8.data<uint8_t>() + i * 105 * 105, g.pixels.data(), g.pixels.size());
  }
  const Tensor r = S == 105 ? u8 : data::resize_area(u8, S, S);
  Tensor x = data::gather_images_float(r, Tensor::arange(n, DType::I64), data::FloatMode::Ink01);
  if (!input_norm) x = kernels::mul_scalar(x, 255.0);
  write_npy(inputs_npy, x.reshape({n, S * S}));
  trunk.eval();
  ag::NoGradGuard no_grad;
  return trunk.forward(ag::Variable(x)).data().contiguous();
}

const std::vector<std::string> kOmniglotSmall = {"--iters", "3", "--batch", "4", "--val-triplets", "12",
                                                 "--val-tasks", "6", "--lr", "1e-3", "--epochs", "1"};

TEST(TorchInterop, OmniglotTripletConv4WithAnchorBranch) {
  MN_SKIP_WITHOUT_TORCH();
  TempDir out("ti_omni_conv4"), cache("cache");
  std::vector<std::string> args = mn_test_exp::base_args(out.str(), cache.str()) + kOmniglotSmall +
                                  std::vector<std::string>{"--trunk", "conv4", "--channels", "8", "--image-size",
                                                           "28", "--conv4-sigmoid", "--lrn", "--batchnorm",
                                                           "--activation", "elu", "--input-norm", "--share",
                                                           "disjoint-anchor"};
  auto w = std::find(args.begin(), args.end(), "--width");  // the Koch net's
  args.erase(w, w + 2);
  testing::internal::CaptureStdout();
  const mn_test_exp::RunResult run = mn_test_exp::run_study(StudyKind::Triplet, args, true);
  testing::internal::GetCapturedStdout();
  ASSERT_EQ(run.rc, 0) << run.err;
  const std::vector<std::string> files = omniglot_files(out / "files.txt");
  nn::Conv4Options o;
  o.input_size = 28, o.channels = 8, o.embedding = 32, o.sigmoid_embedding = true, o.lrn = true;
  o.pool_batchnorm = true, o.activation = kernels::Act::ELU;
  for (const std::string branch : {"branch", "anchor_branch"}) {
    Generator g(0);
    nn::Conv4 trunk(o, g);
    write_npy(out / (branch + ".npy"),
              omniglot_reference(trunk, out / "best.safetensors", branch + ".", files, 28, true, out / "x.npy"));
    torch_compare(out.str(), out / "best.safetensors", out / "files.txt", "", out / (branch + ".npy"),
                  "omniglot_triplet conv4 (LRN, pool BN, ELU, sigmoid), " + branch, true, branch, out / "x.npy");
  }
}

TEST(TorchInterop, OmniglotTripletKochBranch) {
  MN_SKIP_WITHOUT_TORCH();
  TempDir out("ti_omni_koch"), cache("cache");
  testing::internal::CaptureStdout();
  const mn_test_exp::RunResult run = mn_test_exp::run_study(
      StudyKind::Triplet, mn_test_exp::base_args(out.str(), cache.str()) + kOmniglotSmall +
                              std::vector<std::string>{"--lrn", "--batchnorm"},
      true);
  testing::internal::GetCapturedStdout();
  ASSERT_EQ(run.rc, 0) << run.err;
  const std::vector<std::string> files = omniglot_files(out / "files.txt");
  nn::KochBranchOptions o;
  o.width = 0.125, o.embedding = 32, o.lrn = true, o.batchnorm = true;
  Generator g(0);
  nn::KochBranch trunk(o, g);
  write_npy(out / "ref.npy",
            omniglot_reference(trunk, out / "last.safetensors", "branch.", files, 105, false, out / "x.npy"));
  torch_compare(out.str(), out / "last.safetensors", out / "files.txt", "", out / "ref.npy",
                "omniglot_triplet Koch branch (LRN, BN, inputs x 255)", true, "-", out / "x.npy");
}

// The siamese binary: its conv4 trunk under "branch." beside Koch's head ("head.*").
TEST(TorchInterop, OmniglotSiameseConv4AndItsHead) {
  MN_SKIP_WITHOUT_TORCH();
  TempDir out("ti_omni_siamese"), cache("cache");
  std::vector<std::string> args = mn_test_exp::base_args(out.str(), cache.str()) + kOmniglotSmall +
                                  std::vector<std::string>{"--trunk", "conv4", "--channels", "8", "--image-size",
                                                           "32", "--embedding", "0"};
  auto w = std::find(args.begin(), args.end(), "--width");
  args.erase(w, w + 2);
  testing::internal::CaptureStdout();
  const mn_test_exp::RunResult run = mn_test_exp::run_study(StudyKind::Siamese, args, true);
  testing::internal::GetCapturedStdout();
  ASSERT_EQ(run.rc, 0) << run.err;
  const std::vector<std::string> files = omniglot_files(out / "files.txt");
  nn::Conv4Options o;
  o.input_size = 32, o.channels = 8;  // no dense layer: the 8 x 2 x 2 features
  Generator g(0);
  nn::Conv4 trunk(o, g);
  write_npy(out / "ref.npy",
            omniglot_reference(trunk, out / "best.safetensors", "branch.", files, 32, false, out / "x.npy"));
  const Interop r = torch_compare(out.str(), out / "best.safetensors", out / "files.txt", "", out / "ref.npy",
                                  "omniglot_siamese conv4 (no dense layer, inputs x 255)", true, "-", out / "x.npy");
  EXPECT_EQ(r.head, 1);
}

}  // namespace
