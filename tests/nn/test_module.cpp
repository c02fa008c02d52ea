// Module: dotted parameter/buffer names, deduplication of shared weights,
// recursive train/eval, in-place dtype/device moves that keep Variable
// identity, zero_grad, Sequential order.
#include <gtest/gtest.h>

#include "autograd/variable.h"
#include "nn/module.h"
#include "tests/common/test_util.h"

namespace {

using mn::DType;
using mn::Device;
using mn::Tensor;
using mn::ag::Variable;
using mn::nn::Module;
using mn::nn::Sequential;

// A parameter holder with one float buffer and one integer counter buffer.
class Leaf : public Module {
 public:
  Leaf(int64_t in, int64_t out) {
    weight = register_parameter("weight", Tensor::full({out, in}, 0.5));
    bias = register_parameter("bias", Tensor::zeros({out}));
    register_buffer("running", Tensor::ones({out}));
    register_buffer("count", Tensor::zeros({1}, DType::I64));
  }
  // Makes this leaf use `other`'s weight (siamese sharing); the member that
  // forward() would use is updated too, as the real layers do.
  void share_weight_with(const Leaf& other) {
    share_parameter("weight", other.weight);
    weight = other.weight;
  }
  Variable weight, bias;
};

class Net : public Module {
 public:
  Net() {
    scale = register_parameter("scale", Tensor::ones({1}));
    enc = register_module("enc", std::make_shared<Leaf>(3, 4));
    head = register_module("head", std::make_shared<Leaf>(4, 2));
  }
  Variable scale;
  std::shared_ptr<Leaf> enc, head;
};

// y = x + c, recorded on the tape (so Sequential's order is observable).
class AddConst : public Module {
 public:
  explicit AddConst(double c) : c_(c) {}
  Variable forward(const Variable& x) override {
    Tensor y = x.data().contiguous().clone();
    auto v = y.to_vector<double>();
    for (auto& e : v) e = e * 10 + c_;  // order-dependent: (x*10 + a)*10 + b
    return Variable(Tensor::from_vector(v, y.shape()));
  }

 private:
  double c_;
};

std::vector<std::string> names_of(const Module& m) {
  std::vector<std::string> out;
  for (auto& [n, v] : m.named_parameters()) out.push_back(n);
  return out;
}

TEST(NnModule, NamedParametersAreDottedDepthFirst) {
  Net net;
  EXPECT_EQ(names_of(net), (std::vector<std::string>{"scale", "enc.weight", "enc.bias",
                                                     "head.weight", "head.bias"}));
  EXPECT_EQ(net.num_parameters(), 1 + 12 + 4 + 8 + 2);
  std::vector<std::string> bufs;
  for (auto& [n, b] : net.named_buffers()) bufs.push_back(n);
  EXPECT_EQ(bufs, (std::vector<std::string>{"enc.running", "enc.count", "head.running",
                                            "head.count"}));
  EXPECT_EQ(net.parameters().size(), 5u);
  EXPECT_TRUE(net.parameters()[1].is_same(net.enc->weight));
  for (auto& v : net.parameters()) EXPECT_TRUE(v.requires_grad());
}

TEST(NnModule, SharedWeightsAppearOnce) {
  class Siamese : public Module {
   public:
    Siamese() {
      a = register_module("a", std::make_shared<Leaf>(3, 3));
      b = register_module("b", std::make_shared<Leaf>(3, 3));
      b->share_weight_with(*a);
      // The same child registered under a second name is visited once.
      register_module("a_again", a);
    }
    std::shared_ptr<Leaf> a, b;
  } s;
  EXPECT_TRUE(s.a->weight.is_same(s.b->weight));
  EXPECT_EQ(names_of(s), (std::vector<std::string>{"a.weight", "a.bias", "b.bias"}));
  EXPECT_EQ(s.num_parameters(), 9 + 3 + 3);
}

TEST(NnModule, ShareParameterChecksShape) {
  class Bad : public Leaf {
   public:
    Bad() : Leaf(2, 2) {}
    void share(const Variable& v) { share_parameter("weight", v); }
  } bad;
  Variable other(Tensor::zeros({5, 5}), true);
  EXPECT_THROW(bad.share(other), mn::Error);
}

TEST(NnModule, RegisteringTwiceOrDefaultForwardThrows) {
  class Twice : public Module {
   public:
    void go() {
      register_parameter("w", Tensor::zeros({1}));
      register_parameter("w", Tensor::zeros({1}));
    }
  } t;
  EXPECT_THROW(t.go(), mn::Error);
  Module plain;
  EXPECT_THROW(plain.forward(Variable(Tensor::zeros({1}))), mn::Error);
}

TEST(NnModule, TrainEvalIsRecursive) {
  Net net;
  EXPECT_TRUE(net.is_training());
  net.eval();
  EXPECT_FALSE(net.is_training());
  EXPECT_FALSE(net.enc->is_training());
  EXPECT_FALSE(net.head->is_training());
  net.train();
  EXPECT_TRUE(net.head->is_training());
}

TEST(NnModule, ToDTypeKeepsIdentityAndIntegerBuffers) {
  Net net;
  Variable w = net.enc->weight;  // held like an optimizer would
  w.set_grad(Tensor::ones(w.shape()));
  net.to(DType::F64);
  EXPECT_EQ(w.dtype(), DType::F64);
  EXPECT_EQ(w.grad().dtype(), DType::F64);
  EXPECT_EQ(w.data().to_vector<double>()[0], 0.5);
  for (auto& [n, b] : net.named_buffers()) {
    if (n.find("count") != std::string::npos)
      EXPECT_EQ(b->dtype(), DType::I64) << n;
    else
      EXPECT_EQ(b->dtype(), DType::F64) << n;
  }
  EXPECT_THROW(net.to(DType::I32), mn::Error);
}

TEST(NnModule, ZeroGradZeroesInPlace) {
  Net net;
  for (auto& v : net.parameters()) v.set_grad(Tensor::ones(v.shape()));
  const void* before = net.enc->weight.grad().raw_data();
  net.zero_grad();
  for (auto& v : net.parameters()) {
    for (double g : v.grad().to_double_vector()) EXPECT_EQ(g, 0.0);
  }
  EXPECT_EQ(net.enc->weight.grad().raw_data(), before);
}

TEST(NnModule, SequentialRunsInOrder) {
  Sequential seq;
  seq.add("first", std::make_shared<AddConst>(1));
  seq.add("second", std::make_shared<AddConst>(2));
  EXPECT_EQ(seq.size(), 2u);
  Variable y = seq(Variable(Tensor::from_vector<double>({0.0, 1.0}, {2})));
  // ((x*10 + 1)*10 + 2): 12 and 112; the reverse order would give 21 and 121.
  EXPECT_EQ(y.data().to_vector<double>(), (std::vector<double>{12.0, 112.0}));
}

TEST(NnModule, ToCudaKeepsIdentity) {
  MN_SKIP_IF_NO_CUDA();
  Net net;
  Variable w = net.enc->weight;
  net.to(Device::cuda());
  EXPECT_TRUE(w.device().is_cuda());
  for (auto& [n, b] : net.named_buffers()) EXPECT_TRUE(b->is_cuda()) << n;
  EXPECT_TRUE(mn::test::all_close(Tensor::full({4, 3}, 0.5), w.data(), 0, 0));  // exact copy
  net.to(Device::cpu());
  EXPECT_TRUE(w.device().is_cpu());
}

}  // namespace
