// The JSC model zoo: MASE's layer lists and parameter counts, state_dict names, forward
// shapes, determinism, and errors.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "qnum/models/jsc.hpp"
#include "qnum/tensor/ops.hpp"

using qnum::Tensor;

TEST_CASE("jsc models: MASE's trainable parameter counts and layer order") {
  CHECK(qnum::models::make_jsc_model("jsc-tiny")->num_parameters() == 117);
  CHECK(qnum::models::make_jsc_model("jsc-toy")->num_parameters() == 327);
  CHECK(qnum::models::make_jsc_model("jsc-s")->num_parameters() == 5615);
  CHECK(qnum::models::make_jsc_model("jsc-trt")->num_parameters() == 3231);
  CHECK(qnum::models::make_jsc_model("jsc-three-linear")->num_parameters() == 661);
  // 16-64-32-32-5: BN(16) + (16*64+64 + 2*64) + (64*32+32 + 2*32) + (32*32+32 + 2*32) + (32*5+5)
  CHECK(qnum::models::make_jsc_model("jsc-mlp:16-64-32-32-5")->num_parameters() ==
        32 + (1024 + 64 + 128) + (2048 + 32 + 64) + (1024 + 32 + 64) + (160 + 5));
  const auto tiny = qnum::models::make_jsc_model("jsc-tiny");
  const auto sd = tiny->state_dict();
  for (const char* key :
       {"0.weight", "0.bias", "0.running_mean", "0.running_var", "0.num_batches_tracked", "2.weight", "2.bias"})
    CHECK_MESSAGE(sd.count(key) == 1, key);
  CHECK(sd.at("2.weight").shape() == qnum::Shape{5, 16});
}

TEST_CASE("jsc models: forward shapes, non-negative MASE logits, seeds") {
  const Tensor x = Tensor::randn({8, 16}, 1);
  for (const auto& name : qnum::models::jsc_model_names()) {
    CAPTURE(name);
    auto m = qnum::models::make_jsc_model(name, 3);
    auto again = qnum::models::make_jsc_model(name, 3);
    auto other = qnum::models::make_jsc_model(name, 4);
    const auto a = m->state_dict(), b = again->state_dict(), c = other->state_dict();
    const Tensor y = (*m)(x);  // training mode: updates BatchNorm's running statistics
    CHECK(y.shape() == qnum::Shape{8, 5});
    if (name.find(':') == std::string::npos)
      for (float v : y.values()) CHECK(v >= 0.0f);  // MASE's models end in ReLU
    bool same = true, differ = false;
    for (const auto& [k, t] : a) {
      same &= t.to_vector() == b.at(k).to_vector();
      differ |= t.to_vector() != c.at(k).to_vector();
    }
    CHECK(same);
    CHECK(differ);
  }
}

TEST_CASE("jsc models: jsc-seq layer stacks (the lab reports' jsc-custom)") {
  const auto custom =
      qnum::models::make_jsc_model("jsc-seq:bn,relu,linear32,bn,relu,dropout0.2,linear16,bn,relu,dropout0.2,linear5,bn,relu");
  CHECK(custom->size() == 13);
  CHECK(custom->num_parameters() == 1295);  // the lab reports' ~1.3k
  const auto sd = custom->state_dict();
  CHECK(sd.at("2.weight").shape() == qnum::Shape{32, 16});
  CHECK(sd.at("6.weight").shape() == qnum::Shape{16, 32});
  CHECK(sd.at("10.weight").shape() == qnum::Shape{5, 16});
  CHECK((*custom)(Tensor::randn({4, 16}, 1)).shape() == qnum::Shape{4, 5});
  // The same widths as jsc-mlp:16-5 (BN ReLU Linear): the same parameter count.
  CHECK(qnum::models::make_jsc_model("jsc-seq:bn,relu,linear5")->num_parameters() ==
        qnum::models::make_jsc_model("jsc-mlp:16-5")->num_parameters());
  for (const auto& [name, why] : std::vector<std::pair<std::string, std::string>>{
           {"jsc-seq:bn,relu,linear4", "must give 5 classes, not 4"},
           {"jsc-seq:bn,conv3,linear5", "layer 'conv3' is not a layer"},
           {"jsc-seq:linear0,linear5", "needs a width >= 1"},
           {"jsc-seq:linearx,linear5", "needs a width, e.g. linear32"},
           {"jsc-seq:dropout1.5,linear5", "needs a probability in [0, 1)"},
           {"jsc-seq:dropout0.2.1,linear5", "needs a probability"},
           {"jsc-seq:bn,,linear5", "layer '' is not a layer"},
           {"jsc-seq:", "layer '' is not a layer"}}) {
    CAPTURE(name);
    CHECK_THROWS_WITH_AS(qnum::models::make_jsc_model(name), doctest::Contains(why.c_str()), qnum::Error);
  }
}

TEST_CASE("jsc models: bad names") {
  CHECK_THROWS_WITH_AS(qnum::models::make_jsc_model("jsc-m"), doctest::Contains("known: jsc-tiny"), qnum::Error);
  CHECK_THROWS_WITH_AS(qnum::models::make_jsc_model("jsc-mlp:16-x-5"), doctest::Contains("positive integers"),
                       qnum::Error);
  CHECK_THROWS_AS(qnum::models::make_jsc_model("jsc-mlp:16"), qnum::Error);
  CHECK_THROWS_AS(qnum::models::make_jsc_model("jsc-mlp:16-0-5"), qnum::Error);
  CHECK_THROWS_AS(qnum::models::make_jsc_model("jsc-mlp:"), qnum::Error);
}
