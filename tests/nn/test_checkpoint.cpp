// safetensors checkpoints: the exact byte layout of a small file written by
// hand, an independent reader (Python standard library json/struct) applying
// the safetensors rules, round trips of model + optimizer state, atomic
// writes, and clear errors for missing/misshapen tensors and corrupt files.
#include <gtest/gtest.h>
#include <dirent.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "nn/checkpoint.h"
#include "nn/optim/optimizer.h"
#include "tests/common/test_util.h"

namespace {

using mn::DType;
using mn::Tensor;
using mn::ag::Variable;
using mn::nn::Module;

std::vector<std::string> list_dir(const std::string& dir);

// Scratch directories, removed (flat contents, then the directory) at exit.
struct TmpDirs {
  std::vector<std::string> dirs;
  ~TmpDirs() {
    for (auto& d : dirs) {
      for (auto& f : list_dir(d)) std::remove((d + "/" + f).c_str());
      rmdir(d.c_str());
    }
  }
} g_tmp_dirs;

std::string make_tmp_dir() {
  char tmpl[] = "/tmp/mn_ckpt_test_XXXXXX";
  const char* d = mkdtemp(tmpl);
  EXPECT_NE(d, nullptr);
  if (d) g_tmp_dirs.dirs.push_back(d);
  return d ? std::string(d) : std::string("/tmp");
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) out.push_back(e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const mn::Error& e) {
    return e.what();
  }
  return "(no error)";
}

class Block : public Module {
 public:
  explicit Block(double v) {
    register_parameter("weight", Tensor::full({3, 2}, v));
    register_parameter("bias", Tensor::full({3}, v + 1, DType::F32));
    register_buffer("running_mean", Tensor::full({3}, v * 2));
    register_buffer("num_batches", Tensor::full({1}, 7, DType::I64));
  }
};

class Model : public Module {
 public:
  explicit Model(double v) {
    a = register_module("a", std::make_shared<Block>(v));
    b = register_module("b", std::make_shared<Block>(-v));
  }
  std::shared_ptr<Block> a, b;
};

TEST(NnCheckpoint, ByteLayoutMatchesSpec) {
  const std::string dir = make_tmp_dir(), path = dir + "/x.safetensors";
  mn::nn::write_safetensors(path,
                            {{"b", Tensor::from_vector<float>({1.5f, -2.0f}, {2})},
                             {"a", Tensor::from_vector<int64_t>({7}, {})}},
                            {{"epoch", "3"}});
  // Hand-written expectation: sorted names, offsets back to back, header padded
  // with spaces to a multiple of 8, little-endian length and data.
  std::string json =
      "{\"__metadata__\":{\"epoch\":\"3\"},"
      "\"a\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}";
  while (json.size() % 8) json += ' ';
  std::string want;
  for (int i = 0; i < 8; ++i) want += static_cast<char>((json.size() >> (8 * i)) & 0xFF);
  want += json;
  const unsigned char data[16] = {7, 0, 0, 0, 0, 0, 0, 0,           // int64 7
                                  0x00, 0x00, 0xC0, 0x3F,           // float 1.5
                                  0x00, 0x00, 0x00, 0xC0};          // float -2.0
  want.append(reinterpret_cast<const char*>(data), 16);
  EXPECT_EQ(read_bytes(path), want);
  auto f = mn::nn::read_safetensors(path);
  EXPECT_EQ(f.metadata.at("epoch"), "3");
  EXPECT_EQ(f.tensors.at("a").dim(), 0);
  EXPECT_EQ(f.tensors.at("b").to_vector<float>(), (std::vector<float>{1.5f, -2.0f}));
}

// An independent reader: Python's json + struct applying the rules
// safetensors' loader enforces (header is a JSON object, dtype sizes match,
// data_offsets cover the data block contiguously with no gaps or overlaps).
TEST(NnCheckpoint, IndependentPythonReaderAgrees) {
  if (std::system("python3 -c 'import json, struct' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 not available: independent reader test skipped";
  const std::string dir = make_tmp_dir(), path = dir + "/m.safetensors";
  Model m(0.25);
  mn::nn::save_checkpoint(path, m, nullptr, {{"note", "quote \" and \\ and \n"}});
  const std::string script = dir + "/check.py";
  write_bytes(script, R"PY(
import json, struct, sys
raw = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
assert (8 + n) % 8 == 0, 'header not 8-byte aligned'
hdr = json.loads(raw[8:8 + n].decode('utf-8'))
data = raw[8 + n:]
meta = hdr.pop('__metadata__', {})
assert all(isinstance(v, str) for v in meta.values())
assert meta['note'] == 'quote " and \\ and \n', repr(meta['note'])
size = {'F32': 4, 'F64': 8, 'I32': 4, 'I64': 8, 'U8': 1}
fmt = {'F32': 'f', 'F64': 'd', 'I32': 'i', 'I64': 'q', 'U8': 'B'}
spans = sorted((v['data_offsets'][0], v['data_offsets'][1], k) for k, v in hdr.items())
pos = 0
for b, e, k in spans:
    assert b == pos, 'gap or overlap at ' + k
    pos = e
assert pos == len(data), 'data block not fully covered'
for k in sorted(hdr):
    v = hdr[k]
    b, e = v['data_offsets']
    cnt = 1
    for d in v['shape']:
        cnt *= d
    assert e - b == cnt * size[v['dtype']], k
    vals = struct.unpack('<%d%s' % (cnt, fmt[v['dtype']]), data[b:e])
    print(k, v['dtype'], v['shape'], ' '.join(repr(float(x)) for x in vals))
)PY");
  const std::string out = dir + "/out.txt";
  ASSERT_EQ(std::system(("python3 " + script + " " + path + " > " + out + " 2>&1").c_str()), 0)
      << read_bytes(out);
  const std::string want =
      "a.bias F32 [3] 1.25 1.25 1.25\n"
      "a.num_batches I64 [1] 7.0\n"
      "a.running_mean F32 [3] 0.5 0.5 0.5\n"
      "a.weight F32 [3, 2] 0.25 0.25 0.25 0.25 0.25 0.25\n"
      "b.bias F32 [3] 0.75 0.75 0.75\n"
      "b.num_batches I64 [1] 7.0\n"
      "b.running_mean F32 [3] -0.5 -0.5 -0.5\n"
      "b.weight F32 [3, 2] -0.25 -0.25 -0.25 -0.25 -0.25 -0.25\n";
  EXPECT_EQ(read_bytes(out), want);
}

TEST(NnCheckpoint, PythonSafetensorsOpensOurFile) {
  if (std::system("python3 -c 'import safetensors.numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "Python module safetensors not installed (Debian bookworm has no "
                    "python3-safetensors): covered by ByteLayoutMatchesSpec and "
                    "IndependentPythonReaderAgrees instead";
  const std::string dir = make_tmp_dir(), path = dir + "/m.safetensors";
  Model m(0.5);
  mn::nn::save_checkpoint(path, m, nullptr, {{"epoch", "4"}});
  const std::string cmd =
      "python3 -c \"from safetensors.numpy import load_file; from safetensors import safe_open; "
      "t = load_file('" + path + "'); assert float(t['a.weight'][0, 0]) == 0.5; "
      "assert int(t['b.num_batches'][0]) == 7; "
      "f = safe_open('" + path + "', 'np'); assert f.metadata()['epoch'] == '4'\"";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

TEST(NnCheckpoint, RoundTripModelAndOptimizer) {
  const std::string dir = make_tmp_dir(), path = dir + "/ckpt.safetensors";
  Model src(0.3);
  mn::nn::Adam opt_src(src.parameters(), 1e-2);
  for (int s = 0; s < 2; ++s) {
    for (auto& v : src.parameters()) v.set_grad(mn::test::rand(v.shape(), -1, 1, v.dtype(), v.device(), 5 + s));
    opt_src.step();
  }
  mn::Generator gen(1234, 99);
  mn::nn::Metadata md{{"epoch", "2"}, {"config", "{\"lr\": 0.01}"}};
  mn::nn::put_generator_state(md, "rng", gen);
  mn::nn::save_checkpoint(path, src, &opt_src, md);
  EXPECT_EQ(list_dir(dir), std::vector<std::string>{"ckpt.safetensors"});  // no temp file left

  Model dst(-9.0);
  const Variable held = dst.a->parameters()[0];  // identity must survive loading
  mn::nn::Adam opt_dst(dst.parameters(), 1e-2);
  const mn::nn::Metadata got = mn::nn::load_checkpoint(path, dst, &opt_dst);
  EXPECT_EQ(got.at("epoch"), "2");
  EXPECT_EQ(got.at("config"), "{\"lr\": 0.01}");
  EXPECT_EQ(got.at("optimizer"), "Adam");
  mn::Generator g2;
  mn::nn::get_generator_state(got, "rng", g2);
  EXPECT_EQ(g2.seed(), 1234u);
  EXPECT_EQ(g2.offset(), 99u);

  auto ps = src.named_parameters(), pd = dst.named_parameters();
  ASSERT_EQ(ps.size(), pd.size());
  for (size_t i = 0; i < ps.size(); ++i)
    EXPECT_TRUE(mn::test::all_close(ps[i].second.data(), pd[i].second.data(), 0, 0)) << ps[i].first;
  EXPECT_TRUE(held.is_same(dst.a->parameters()[0]));
  auto bs = src.named_buffers(), bd = dst.named_buffers();
  for (size_t i = 0; i < bs.size(); ++i)
    EXPECT_TRUE(mn::test::all_close(*bs[i].second, *bd[i].second, 0, 0)) << bs[i].first;
  EXPECT_EQ(opt_dst.step_count(0), 2);
  // One more identical step on both gives bitwise identical parameters.
  for (auto* m : {&src, &dst})
    for (auto& v : m->parameters()) v.set_grad(mn::test::rand(v.shape(), -1, 1, v.dtype(), v.device(), 77));
  opt_src.step();
  opt_dst.step();
  for (size_t i = 0; i < ps.size(); ++i)
    EXPECT_TRUE(mn::test::all_close(ps[i].second.data(), pd[i].second.data(), 0, 0)) << ps[i].first;

  // Overwriting an existing checkpoint is atomic too and leaves one file.
  mn::nn::save_checkpoint(path, dst, &opt_dst, {});
  EXPECT_EQ(list_dir(dir), std::vector<std::string>{"ckpt.safetensors"});
}

TEST(NnCheckpoint, WriteIntoMissingDirectoryFailsCleanly) {
  const std::string dir = make_tmp_dir();
  Model m(1.0);
  const std::string msg = error_of([&] { mn::nn::save_checkpoint(dir + "/nope/c.safetensors", m); });
  EXPECT_NE(msg.find("nope/c.safetensors"), std::string::npos) << msg;
  EXPECT_TRUE(list_dir(dir).empty());
}

TEST(NnCheckpoint, ClearErrors) {
  const std::string dir = make_tmp_dir(), path = dir + "/c.safetensors";
  Model m(1.0);
  mn::nn::save_checkpoint(path, m);
  const std::string good = read_bytes(path);

  // Missing tensor: a model with an extra child.
  class Bigger : public Model {
   public:
    Bigger() : Model(1.0) { register_module("extra", std::make_shared<Block>(2.0)); }
  } bigger;
  std::string msg = error_of([&] { mn::nn::load_checkpoint(path, bigger); });
  EXPECT_NE(msg.find("extra.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find(path), std::string::npos) << msg;

  // Wrong shape.
  mn::nn::write_safetensors(dir + "/shape.safetensors",
                            {{"a.weight", Tensor::zeros({2, 2})}, {"a.bias", Tensor::zeros({3})},
                             {"a.running_mean", Tensor::zeros({3})},
                             {"a.num_batches", Tensor::zeros({1}, DType::I64)}});
  class Single : public Module {
   public:
    Single() { register_module("a", std::make_shared<Block>(0.0)); }
  } single;
  msg = error_of([&] { mn::nn::load_checkpoint(dir + "/shape.safetensors", single); });
  EXPECT_NE(msg.find("a.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(2, 2)"), std::string::npos) << msg;

  // Truncated data, truncated header, too short for the length.
  write_bytes(dir + "/trunc.safetensors", good.substr(0, good.size() - 5));
  msg = error_of([&] { mn::nn::read_safetensors(dir + "/trunc.safetensors"); });
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  EXPECT_NE(msg.find("trunc.safetensors"), std::string::npos) << msg;
  write_bytes(dir + "/trunc2.safetensors", good.substr(0, 40));
  msg = error_of([&] { mn::nn::read_safetensors(dir + "/trunc2.safetensors"); });
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  write_bytes(dir + "/short.safetensors", "abc");
  EXPECT_THROW(mn::nn::read_safetensors(dir + "/short.safetensors"), mn::Error);

  // Bad JSON: break the header's first brace.
  std::string bad = good;
  bad[8] = '[';
  write_bytes(dir + "/json.safetensors", bad);
  msg = error_of([&] { mn::nn::read_safetensors(dir + "/json.safetensors"); });
  EXPECT_NE(msg.find("json.safetensors"), std::string::npos) << msg;
  bad = good;
  bad[12] = '\x01';
  write_bytes(dir + "/json2.safetensors", bad);
  msg = error_of([&] { mn::nn::read_safetensors(dir + "/json2.safetensors"); });
  EXPECT_NE(msg.find("bad JSON"), std::string::npos) << msg;

  // A shape whose byte size wraps around 2^64 to the (empty) data_offsets span:
  // 2^61 float64 elements = 2^64 bytes. Must be refused, not read as a tensor
  // of 2^61 elements over an empty buffer.
  {
    std::string hdr =
        "{\"w\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952],\"data_offsets\":[0,0]}}";
    hdr.append((8 - hdr.size() % 8) % 8, ' ');
    std::string file(8, '\0');
    for (int b = 0; b < 8; ++b) file[b] = static_cast<char>((hdr.size() >> (8 * b)) & 0xff);
    write_bytes(dir + "/wrap.safetensors", file + hdr);
    msg = error_of([&] { mn::nn::read_safetensors(dir + "/wrap.safetensors"); });
    EXPECT_NE(msg.find("wrap.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("larger than"), std::string::npos) << msg;
  }

  // Missing file.
  msg = error_of([&] { mn::nn::read_safetensors(dir + "/absent.safetensors"); });
  EXPECT_NE(msg.find("absent.safetensors"), std::string::npos) << msg;
  // A failed load leaves the model untouched.
  EXPECT_EQ(single.named_parameters()[0].second.data().to_vector<float>()[0], 0.0f);
}

// A path that is a folder opens as a stream on Linux; it must be refused by
// name, not read as garbage header bytes. A generator offset beyond 64 bits is
// refused naming the key and the file.
TEST(NnCheckpoint, FolderAndOverflowingMetadataAreClearErrors) {
  const std::string dir = make_tmp_dir();
  std::string msg = error_of([&] { mn::nn::read_safetensors(dir); });
  EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir), std::string::npos) << msg;
  msg = error_of([&] { mn::nn::read_safetensors_metadata(dir); });
  EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
  Model m(1.0);
  msg = error_of([&] { mn::nn::load_checkpoint(dir, m); });
  EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;

  mn::nn::Metadata md = {{"g.seed", "1"}, {"g.offset", "18446744073709551616"}};  // 2^64
  mn::Generator g(0);
  msg = error_of([&] { mn::nn::get_generator_state(md, "g", g, "x.safetensors"); });
  EXPECT_NE(msg.find("g.offset"), std::string::npos) << msg;
  EXPECT_NE(msg.find("x.safetensors"), std::string::npos) << msg;
  md["g.offset"] = "18446744073709551615";  // 2^64 - 1 fits
  mn::nn::get_generator_state(md, "g", g);
  EXPECT_EQ(g.offset(), 18446744073709551615ULL);
}

// The metadata alone, without reading the tensors.
TEST(NnCheckpoint, MetadataOnlyRead) {
  const std::string dir = make_tmp_dir(), path = dir + "/m.safetensors";
  Model m(2.0);
  mn::nn::save_checkpoint(path, m, nullptr, {{"epoch", "7"}, {"note", "caf\xc3\xa9 \"quoted\""}});
  mn::nn::Metadata md = mn::nn::read_safetensors_metadata(path);
  EXPECT_EQ(md.at("epoch"), "7");
  EXPECT_EQ(md.at("note"), "caf\xc3\xa9 \"quoted\"");
  EXPECT_EQ(md.at("format"), "metricnet-checkpoint-v1");
  EXPECT_EQ(md, mn::nn::read_safetensors(path).metadata);
}

// Issue 37: non-finite weights are refused at load, naming the file and the
// first tensor (in the file's order) that holds one, and the model is left as it was.
TEST(NnCheckpoint, NonFiniteWeightsAreRefusedNamingFileAndTensor) {
  const std::string dir = make_tmp_dir(), path = dir + "/nan.safetensors";
  Model src(1.5);
  mn::nn::save_checkpoint(path, src);
  mn::nn::SafetensorsFile f = mn::nn::read_safetensors(path);
  f.tensors.at("b.weight").data<float>()[4] = std::nanf("");
  f.tensors.at("b.running_mean").data<float>()[1] = -INFINITY;  // a buffer too, later in the file
  mn::nn::NamedTensors all(f.tensors.begin(), f.tensors.end());
  mn::nn::write_safetensors(path, all, f.metadata);
  Model dst(0.25);
  std::string msg = error_of([&] { mn::nn::load_checkpoint(path, dst); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("'b.running_mean'"), std::string::npos) << msg;  // sorted: b.running_mean < b.weight
  EXPECT_NE(msg.find("-Inf"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not finite"), std::string::npos) << msg;
  EXPECT_EQ(dst.a->named_parameters()[0].second.data().to_vector<float>()[0], 0.25f);  // untouched
  f.tensors.at("b.running_mean").data<float>()[1] = 0.0f;
  all.assign(f.tensors.begin(), f.tensors.end());
  mn::nn::write_safetensors(path, all, f.metadata);
  msg = error_of([&] { mn::nn::load_checkpoint(path, dst); });
  EXPECT_NE(msg.find("'b.weight' holds NaN (element 4 of 6"), std::string::npos) << msg;
  // Finite weights load as before.
  mn::nn::save_checkpoint(path, src);
  mn::nn::load_checkpoint(path, dst);
  EXPECT_EQ(dst.a->named_parameters()[0].second.data().to_vector<float>()[0], 1.5f);
}

// Issue 37: the tensors' shapes alone, from the header.
TEST(NnCheckpoint, ShapesOnlyRead) {
  const std::string dir = make_tmp_dir(), path = dir + "/s.safetensors";
  Model m(2.0);
  mn::nn::save_checkpoint(path, m);
  const auto shapes = mn::nn::read_safetensors_shapes(path);
  ASSERT_EQ(shapes.size(), 8u);
  EXPECT_EQ(shapes.at("a.weight"), (mn::Shape{3, 2}));
  EXPECT_EQ(shapes.at("b.num_batches"), (mn::Shape{1}));
}

TEST(NnCheckpoint, CudaTensorsRoundTrip) {
  MN_SKIP_IF_NO_CUDA();
  const std::string dir = make_tmp_dir(), path = dir + "/g.safetensors";
  Model src(0.7), dst(0.0);
  src.to(mn::Device::cuda());
  dst.to(mn::Device::cuda());
  mn::nn::save_checkpoint(path, src);
  mn::nn::load_checkpoint(path, dst);
  auto ps = src.named_parameters(), pd = dst.named_parameters();
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_TRUE(pd[i].second.device().is_cuda());
    EXPECT_TRUE(mn::test::all_close(ps[i].second.data(), pd[i].second.data(), 0, 0));
  }
}

}  // namespace
