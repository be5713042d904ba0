// nn::Module and the layers: tree names and counts as PyTorch's, state_dict round trip and
// every load_state_dict error, train/eval and freeze propagation, layers equal to the
// functional ops, and a gradient check through Sequential(Linear, ReLU, Linear).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qnum/nn/layers.hpp"
#include "tensor/gradcheck.hpp"

using qnum::Tensor;
namespace nn = qnum::nn;

namespace {

/// A small model with a parameter, a buffer and a nested Sequential of its own.
class Net : public nn::Module {
 public:
  Net() {
    scale = register_parameter("scale", Tensor::ones({1}));
    register_buffer("counter", Tensor::zeros({2}));
    layers =
        register_module("layers", std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
                                      std::make_shared<nn::Linear>(4, 8, true, 1), std::make_shared<nn::ReLU>(),
                                      std::make_shared<nn::BatchNorm1d>(8), std::make_shared<nn::Linear>(8, 2, true, 2),
                                      std::make_shared<nn::Dropout>(0.5f, 3)}));
  }
  std::string type_name() const override { return "Net"; }
  Tensor forward(const Tensor& x) override { return qnum::mul(layers->forward(x), scale); }

  Tensor scale;
  std::shared_ptr<nn::Sequential> layers;
};

template <class Pairs>
std::vector<std::string> names(const Pairs& pairs) {
  std::vector<std::string> out;
  for (auto& p : pairs) out.push_back(p.first);
  return out;
}

bool same_values(const Tensor& a, const Tensor& b) { return a.shape() == b.shape() && a.to_vector() == b.to_vector(); }

}  // namespace

TEST_CASE("nn::Module: tree names, order and counts as PyTorch's") {
  Net net;
  CHECK(names(net.named_parameters()) == std::vector<std::string>{"scale", "layers.0.weight", "layers.0.bias",
                                                                  "layers.2.weight", "layers.2.bias", "layers.3.weight",
                                                                  "layers.3.bias"});
  CHECK(names(net.named_buffers()) == std::vector<std::string>{"counter", "layers.2.running_mean",
                                                               "layers.2.running_var", "layers.2.num_batches_tracked"});
  CHECK(names(net.named_modules()) ==
        std::vector<std::string>{"", "layers", "layers.0", "layers.1", "layers.2", "layers.3", "layers.4"});
  CHECK(net.named_modules()[3].second->type_name() == "ReLU");
  CHECK(names(net.children()) == std::vector<std::string>{"layers"});
  CHECK(net.layers->size() == 5);
  CHECK((*net.layers)[3]->type_name() == "Linear");
  CHECK_THROWS_AS((*net.layers)[5], qnum::Error);
  CHECK(net.num_parameters() == 1 + (4 * 8 + 8) + (8 + 8) + (8 * 2 + 2));
  CHECK(net.parameters().size() == 7);
  for (const Tensor& p : net.parameters()) CHECK(p.requires_grad());
  for (auto& [name, b] : net.named_buffers()) CHECK(!b.requires_grad());
  // handles: the listed parameter is the module's own tensor
  CHECK(net.parameters()[0].id() == net.scale.id());
  // registration errors
  CHECK_THROWS_WITH_AS(net.register_parameter("scale", Tensor::ones({1})), doctest::Contains("already registered"),
                       qnum::Error);
  CHECK_THROWS_WITH_AS(net.register_buffer("a.b", Tensor::ones({1})), doctest::Contains("contain no '.'"), qnum::Error);
  CHECK_THROWS_AS(net.register_module("x", std::shared_ptr<nn::ReLU>()), qnum::Error);
  CHECK_THROWS_WITH_AS(net.register_buffer("g", Tensor::ones({1}, true)), doctest::Contains("must not require grad"),
                       qnum::Error);
  // the default forward
  nn::Module plain;
  CHECK_THROWS_WITH_AS(plain(Tensor::ones({1})), doctest::Contains("Module has no single-tensor forward"), qnum::Error);
}

TEST_CASE("nn::Module: tied weights are one parameter with two state_dict keys, as PyTorch") {
  nn::Module tied;
  auto enc = tied.register_module("enc", std::make_shared<nn::Embedding>(4, 3, 1));
  auto dec = std::make_shared<nn::Module>();
  dec->register_parameter("weight", enc->weight);  // tying = registering the same tensor twice
  tied.register_module("dec", dec);
  CHECK(names(tied.named_parameters()) == std::vector<std::string>{"enc.weight"});
  CHECK(tied.num_parameters() == 12);
  CHECK(names(tied.state_dict()) == std::vector<std::string>{"dec.weight", "enc.weight"});
  auto state = tied.state_dict();
  state.at("dec.weight").values()[0] = 5.0f;
  state.at("enc.weight").values()[0] = 5.0f;
  tied.load_state_dict(state);
  CHECK(enc->weight.values()[0] == 5.0f);
  state.erase("dec.weight");
  CHECK_THROWS_WITH_AS(tied.load_state_dict(state), doctest::Contains("missing keys: dec.weight"), qnum::Error);
}

TEST_CASE("nn::Module: state_dict round trip keeps parameter identity") {
  Net a;
  a.train();
  a.forward(Tensor::randn({6, 4}, 5));  // moves the BatchNorm running statistics
  const auto state = a.state_dict();
  CHECK(names(state) == std::vector<std::string>{"counter", "layers.0.bias", "layers.0.weight", "layers.2.bias",
                                                 "layers.2.num_batches_tracked", "layers.2.running_mean",
                                                 "layers.2.running_var", "layers.2.weight", "layers.3.bias",
                                                 "layers.3.weight", "scale"});
  CHECK(state.at("layers.2.num_batches_tracked").item() == 1.0f);
  CHECK(state.at("layers.2.num_batches_tracked").shape().empty());
  // detached copies: later changes to the model do not reach the saved state
  CHECK(!state.at("scale").requires_grad());
  a.scale.values()[0] = 7.0f;
  CHECK(state.at("scale").item() == 1.0f);

  Net b;  // same seeds, so change b first to see the load
  for (Tensor p : b.parameters()) p.values()[0] += 1.0f;
  const Tensor w = b.layers->children()[0].second->named_parameters()[0].second;
  b.load_state_dict(state);
  for (auto& [name, t] : b.state_dict()) CHECK_MESSAGE(same_values(t, state.at(name)), name);
  CHECK(b.layers->children()[0].second->named_parameters()[0].second.id() == w.id());
  CHECK(w.requires_grad());
  // the loaded model computes what the saved one did
  a.load_state_dict(state);
  a.eval(), b.eval();
  const Tensor x = Tensor::randn({3, 4}, 9);
  CHECK(same_values(a(x), b(x)));
}

TEST_CASE("nn::Module: load_state_dict errors name every key and change nothing") {
  Net net;
  const auto good = net.state_dict();
  const auto before = net.state_dict();

  auto missing = good;
  missing.erase("layers.0.bias");
  missing.erase("counter");
  CHECK_THROWS_WITH_AS(net.load_state_dict(missing),
                       doctest::Contains("Net.load_state_dict: missing keys: layers.0.bias, counter"), qnum::Error);

  auto unexpected = good;
  unexpected["layers.9.weight"] = Tensor::ones({1});
  CHECK_THROWS_WITH_AS(net.load_state_dict(unexpected), doctest::Contains("unexpected keys: layers.9.weight"),
                       qnum::Error);

  auto mismatched = good;
  mismatched["layers.3.weight"] = Tensor::zeros({8, 2});
  mismatched["scale"] = Tensor::zeros({5});
  CHECK_THROWS_WITH_AS(net.load_state_dict(mismatched),
                       doctest::Contains("shape mismatch: scale (checkpoint [5], model [1]), layers.3.weight "
                                         "(checkpoint [8, 2], model [2, 8])"),
                       qnum::Error);
  auto undefined = good;
  undefined["scale"] = Tensor();
  CHECK_THROWS_WITH_AS(net.load_state_dict(undefined), doctest::Contains("scale (undefined tensor)"), qnum::Error);

  // all problems in one message
  auto all = missing;
  all["extra"] = Tensor::ones({1});
  all["scale"] = Tensor::zeros({2});
  CHECK_THROWS_WITH_AS(net.load_state_dict(all),
                       doctest::Contains("missing keys: layers.0.bias, counter; unexpected keys: extra; shape "
                                         "mismatch: scale (checkpoint [2], model [1])"),
                       qnum::Error);
  // a failed load changed nothing, though some keys were valid
  for (auto& [name, t] : net.state_dict()) CHECK(same_values(t, before.at(name)));

  // non-strict: missing and unexpected keys are ignored, the rest is loaded
  auto partial = unexpected;
  partial.erase("counter");
  partial["scale"] = Tensor({1}, {3.0f});
  net.load_state_dict(partial, false);
  CHECK(net.scale.item() == 3.0f);
  // ...but shapes must still match
  CHECK_THROWS_WITH_AS(net.load_state_dict(mismatched, false), doctest::Contains("shape mismatch"), qnum::Error);
}

TEST_CASE("nn::Module: train/eval and freeze reach every descendant") {
  Net net;
  CHECK(net.is_training());
  net.eval();
  for (auto& [name, m] : net.named_modules()) CHECK_MESSAGE(!m->is_training(), name);
  net.train();
  for (auto& [name, m] : net.named_modules()) CHECK_MESSAGE(m->is_training(), name);
  net.layers->eval();  // a subtree only
  CHECK(net.is_training());
  CHECK(!(*net.layers)[2]->is_training());
  net.train(true);

  const std::int64_t total = net.num_parameters();
  net.freeze();
  CHECK(net.num_parameters(true) == 0);
  CHECK(net.num_parameters() == total);
  for (const Tensor& p : net.parameters()) CHECK(!p.requires_grad());
  // a frozen model builds no tape
  CHECK(!net(Tensor::randn({4, 4}, 1)).requires_grad());
  (*net.layers)[3]->unfreeze();
  CHECK(net.num_parameters(true) == 8 * 2 + 2);
  net.unfreeze();
  CHECK(net.num_parameters(true) == total);

  net(Tensor::randn({4, 4}, 2)).backward(Tensor::ones({4, 2}));
  for (const Tensor& p : net.parameters()) CHECK(p.has_grad());
  net.zero_grad();
  for (const Tensor& p : net.parameters()) CHECK(!p.has_grad());
}

TEST_CASE("nn layers: outputs equal the functional ops, PyTorch init ranges") {
  const Tensor x = Tensor::randn({5, 6}, 11);
  SUBCASE("Linear") {
    nn::Linear lin(6, 3, true, 7);
    CHECK(lin.weight.shape() == qnum::Shape{3, 6});
    CHECK(lin.bias.shape() == qnum::Shape{3});
    const float bound = 1.0f / std::sqrt(6.0f);
    for (float v : lin.weight.values()) CHECK((v >= -bound && v <= bound));
    for (float v : lin.bias.values()) CHECK((v >= -bound && v <= bound));
    CHECK(same_values(lin(x), qnum::linear(x, lin.weight, lin.bias)));
    nn::Linear same(6, 3, true, 7), other(6, 3, true, 8);
    CHECK(same_values(same.weight, lin.weight));
    CHECK(same_values(same.bias, lin.bias));
    CHECK(!same_values(other.weight, lin.weight));
    nn::Linear nobias(6, 3, false, 7);
    CHECK(!nobias.bias.defined());
    CHECK(names(nobias.named_parameters()) == std::vector<std::string>{"weight"});
    CHECK(same_values(nobias(x), qnum::linear(x, nobias.weight)));
    CHECK_THROWS_WITH_AS(nn::Linear(0, 3), doctest::Contains("Linear: in_features must be > 0"), qnum::Error);
  }
  SUBCASE("LayerNorm") {
    nn::LayerNorm ln(6, 1e-3f);
    ln.weight.values()[1] = 2.0f;
    ln.bias.values()[2] = -1.0f;
    CHECK(same_values(ln(x), qnum::layer_norm(x, ln.weight, ln.bias, 1e-3f)));
    CHECK(names(ln.named_parameters()) == std::vector<std::string>{"weight", "bias"});
  }
  SUBCASE("BatchNorm1d: training updates running stats and counts batches; eval uses them") {
    nn::BatchNorm1d bn(6, 1e-5f, 0.2f);
    const Tensor rm = Tensor::zeros({6}), rv = Tensor::ones({6});
    const Tensor y = bn(x);
    CHECK(same_values(y, qnum::batch_norm(x, rm, rv, bn.weight, bn.bias, true, 0.2f, 1e-5f)));
    CHECK(same_values(bn.running_mean, rm));
    CHECK(same_values(bn.running_var, rv));
    CHECK(bn.num_batches_tracked.item() == 1.0f);
    bn.eval();
    CHECK(same_values(bn(x), qnum::batch_norm(x, rm, rv, bn.weight, bn.bias, false)));
    CHECK(bn.num_batches_tracked.item() == 1.0f);
  }
  SUBCASE("activations and Identity") {
    CHECK(same_values(nn::ReLU()(x), qnum::relu(x)));
    CHECK(same_values(nn::GELU()(x), qnum::gelu(x)));
    CHECK(same_values(nn::Tanh()(x), qnum::tanh(x)));
    CHECK(nn::Identity()(x).id() == x.id());
  }
  SUBCASE("Dropout: a new deterministic mask per call, identity in eval") {
    nn::Dropout d(0.5f, 42), d2(0.5f, 42);
    const Tensor big = Tensor::ones({1000});
    const Tensor m1 = d(big), m2 = d(big);
    CHECK(!same_values(m1, m2));
    CHECK(d.calls() == 2);
    CHECK(same_values(d2(big), m1));  // same seed, same sequence
    CHECK(same_values(d2(big), m2));
    int kept = 0;
    for (float v : m1.values()) {
      CHECK((v == 0.0f || v == 2.0f));
      kept += v != 0.0f;
    }
    CHECK((kept > 400 && kept < 600));
    d.eval();
    CHECK(d(big).id() == big.id());
    CHECK(d.calls() == 2);
    d.set_calls(0);
    d.train();
    CHECK(same_values(d(big), m1));
    CHECK_THROWS_AS(nn::Dropout(1.0f), qnum::Error);
  }
  SUBCASE("Embedding") {
    nn::Embedding emb(10, 4, 3);
    CHECK(emb.weight.shape() == qnum::Shape{10, 4});
    const std::vector<std::int64_t> idx{3, 0, 9, 3};
    const Tensor e = emb.forward_indices(idx, {2, 2});
    CHECK(same_values(e, qnum::embedding(idx, {2, 2}, emb.weight)));
    CHECK(same_values(emb(Tensor({2, 2}, {3, 0, 9, 3})), e));
    CHECK_THROWS_WITH_AS(emb(Tensor({1}, {1.5f})), doctest::Contains("not a whole number"), qnum::Error);
    CHECK_THROWS_AS(emb(Tensor({1}, {10.0f})), qnum::Error);
    CHECK(same_values(nn::Embedding(10, 4, 3).weight, emb.weight));
  }
}

TEST_CASE("nn layers: gradient check through Sequential(Linear, ReLU, Linear) parameters") {
  nn::Sequential mlp({std::make_shared<nn::Linear>(3, 5, true, 21), std::make_shared<nn::ReLU>(),
                      std::make_shared<nn::Linear>(5, 2, true, 22)});
  const Tensor x = Tensor::randn({4, 3}, 23);
  std::vector<Tensor> params = mlp.parameters();
  CHECK(params.size() == 4);
  // gradcheck perturbs the handles in place, so the module sees every change
  CHECK(qnum_test::gradcheck([&](const std::vector<Tensor>&) { return mlp(x); }, params) == 0);
  // and the input gradient, through the same model
  Tensor xi = x.clone().set_requires_grad(true);
  CHECK(qnum_test::gradcheck([&](const std::vector<Tensor>& in) { return mlp(in[0]); }, {xi}) == 0);
}
