// The NAS-BERT space (search/nas_bert.hpp), BERT's Identity replacement (models/bert.hpp)
// and the ShuffledGridSampler (search/shuffled_grid_sampler.hpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "qnum/models/bert.hpp"
#include "qnum/passes/structure.hpp"
#include "qnum/search/in_memory_storage.hpp"
#include "qnum/search/nas_bert.hpp"
#include "qnum/search/random_sampler.hpp"
#include "qnum/search/shuffled_grid_sampler.hpp"
#include "qnum/search/study.hpp"
#include "qnum/search/tpe.hpp"
#include "search/helpers.hpp"

using namespace qnum;
using namespace qnum::search;

namespace {

models::BertConfig small_base() {
  models::BertConfig c = models::bert_config("bert-tiny");
  c.vocab_size = 50;
  c.max_position_embeddings = 16;
  return c;
}

// Square Linears by scanning the model, as MASE's tutorial does.
std::vector<std::string> scanned_square_linears(models::BertForSequenceClassification& m) {
  std::vector<std::string> out;
  for (auto& [path, mod] : m.named_modules())
    if (auto* l = dynamic_cast<nn::Linear*>(mod); l && l->in_features == l->out_features) out.push_back(path);
  return out;
}

Tensor ids(std::int64_t b, std::int64_t t) {
  std::vector<float> v(static_cast<std::size_t>(b * t));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7 + 3) % 50);
  return Tensor({b, t}, std::move(v));
}

}  // namespace

TEST_CASE("search.nas_bert: square Linear paths are the model's in module order") {
  const NasBertSpace space(small_base());
  for (auto [l, a, h, i] : {std::array<std::int64_t, 4>{2, 2, 16, 32}, {3, 4, 32, 32}, {1, 2, 2, 8}}) {
    auto cfg = space.config(l, a, h, i);
    models::BertForSequenceClassification m(cfg, 1);
    CAPTURE(l);
    CAPTURE(h);
    CAPTURE(i);
    CHECK(models::bert_square_linear_paths(cfg) == scanned_square_linears(m));
  }
  const auto p = models::bert_square_linear_paths(space.config(1, 2, 16, 16));
  CHECK(p == std::vector<std::string>{
                 "bert.encoder.layer.0.attention.self.query", "bert.encoder.layer.0.attention.self.key",
                 "bert.encoder.layer.0.attention.self.value", "bert.encoder.layer.0.attention.output.dense",
                 "bert.encoder.layer.0.intermediate.dense", "bert.encoder.layer.0.output.dense", "bert.pooler.dense"});
}

TEST_CASE("search.nas_bert: replace_with_identity keeps the position, drops the parameters, runs") {
  auto cfg = small_base();
  cfg.hidden_size = 16;
  cfg.intermediate_size = 32;
  models::BertForSequenceClassification m(cfg, 3);
  const auto before = m.num_parameters();
  const auto order = [&] {
    std::vector<std::string> names;
    for (auto& [path, mod] : m.named_modules()) names.push_back(path);
    return names;
  }();
  m.eval();
  const Tensor y0 = m.forward(ids(2, 5));
  for (const char* p : {"bert.encoder.layer.0.attention.self.query", "bert.encoder.layer.1.attention.output.dense",
                        "bert.pooler.dense"})
    models::replace_with_identity(m, p);
  CHECK(m.num_parameters() == before - 3 * (16 * 16 + 16));
  std::vector<std::string> after;
  for (auto& [path, mod] : m.named_modules()) after.push_back(path);
  CHECK(after == order);  // same names, same places
  CHECK(m.at("bert.encoder.layer.0.attention.self.query").type_name() == "Identity");
  CHECK(m.bert->layers[0]->attention->self->query == nullptr);
  CHECK(m.bert->layers[0]->attention->self->key != nullptr);
  CHECK(m.bert->pooler->dense == nullptr);
  CHECK(m.state_dict().count("bert.pooler.dense.weight") == 0);
  const Tensor y1 = m.forward(ids(2, 5));
  CHECK(y1.shape() == y0.shape());
  CHECK(y1.values()[0] != y0.values()[0]);

  // Training runs through the identities: gradients reach the remaining key weight.
  m.train();
  Tensor loss = sum(m.forward(ids(2, 5)));
  loss.backward();
  CHECK(m.bert->layers[0]->attention->self->key->weight.has_grad());

  using qnum_search_test::error_of;
  CHECK(error_of([&] {
          models::replace_with_identity(m, "bert.encoder.layer.0.intermediate.dense");
        }).find("is 16 -> 32; only a square Linear") != std::string::npos);
  CHECK(error_of([&] {
          models::replace_with_identity(m, "bert.encoder.layer.0.attention.self.query");
        }).find("is a Identity, not a Linear") != std::string::npos);
  CHECK(error_of([&] {
          models::replace_with_identity(m, "bert.encoder.layer.9.attention.self.query");
        }).find("ModuleList has no child '9'") != std::string::npos);
}

TEST_CASE("search.nas_bert: the structure records identities; a fresh model rebuilt from it computes the same") {
  auto cfg = small_base();
  cfg.hidden_size = 16;
  cfg.intermediate_size = 32;
  models::BertForSequenceClassification m(cfg, 3);
  for (const char* p : {"bert.encoder.layer.0.attention.self.key", "bert.pooler.dense"})
    models::replace_with_identity(m, p);
  const auto structure = passes::describe_structure(m);
  const nlohmann::json expected = {{"bert.encoder.layer.0.attention.self.key", {{"identity", true}}},
                                   {"bert.pooler.dense", {{"identity", true}}}};
  CHECK(structure == expected);

  models::BertForSequenceClassification fresh(cfg, 9);  // other initial values, then m's state
  passes::restore_structure(fresh, nlohmann::json::parse(structure.dump()));
  CHECK(fresh.at("bert.pooler.dense").type_name() == "Identity");
  CHECK(fresh.num_parameters() == m.num_parameters());
  fresh.load_state_dict(m.state_dict());
  m.eval(), fresh.eval();
  const Tensor y = m.forward(ids(2, 5)), y_fresh = fresh.forward(ids(2, 5));
  CHECK(std::equal(y.values().begin(), y.values().end(), y_fresh.values().begin(), y_fresh.values().end()));
  CHECK(passes::describe_structure(fresh) == structure);
  passes::restore_structure(fresh, structure);  // already an Identity: nothing to do

  using qnum_search_test::error_of;
  models::BertForSequenceClassification other(cfg, 0);
  CHECK(error_of([&] {
          passes::restore_structure(other, {{"bert.encoder.layer.0.intermediate.dense", {{"identity", true}}}});
        }).find("only a square Linear can become Identity, not Linear") != std::string::npos);
  CHECK(error_of([&] {
          passes::restore_structure(other, {{"bert.pooler.dense", {{"identity", true}, {"weight_mask", true}}}});
        }).find("identity must be true and alone") != std::string::npos);
  CHECK(other.at("bert.pooler.dense").type_name() == "Linear");  // nothing applied on error
}

TEST_CASE("search.nas_bert: trials apply every size and identity choice; non-divisible heads are pruned") {
  const NasBertSpace space(small_base(), {1, 2}, {2, 3}, {16, 24}, {16, 32});
  auto storage = std::make_shared<InMemoryStorage>();
  Study study(storage, "nas", {StudyDirection::maximize}, std::make_shared<RandomSampler>(5));
  int built = 0, pruned = 0;
  study.optimize(
      [&](Trial& t) {
        NasBertChoice c;
        try {
          c = space.sample(t);
        } catch (const TrialPruned&) {
          ++pruned;
          throw;
        }
        auto m = NasBertSpace::build(c, 7);
        ++built;
        CHECK(static_cast<std::int64_t>(m->bert->layers.size()) == c.config.num_hidden_layers);
        CHECK(m->bert->layers[0]->attention->self->heads == c.config.num_attention_heads);
        CHECK(m->config.hidden_size == c.config.hidden_size);
        std::int64_t identities = 0;
        for (auto& [path, mod] : m->named_modules()) identities += mod->type_name() == "Identity";
        CHECK(identities == static_cast<std::int64_t>(c.identity.size()));
        CHECK(static_cast<std::int64_t>(t.frozen().params.size()) == 4 + c.square_linears);
        m->eval();
        CHECK(m->forward(ids(1, 4)).shape() == Shape{1, 2});
        return static_cast<double>(c.identity.size());
      },
      24);
  CHECK(built + pruned == 24);
  CHECK(pruned > 0);  // hidden 16 with 3 heads
  for (const auto& t : study.get_trials())
    if (t.state == TrialState::pruned) {
      CHECK(t.user_attrs["pruned_reason"].get<std::string>().find("hidden_size 16 is not a multiple of "
                                                                  "num_attention_heads 3") != std::string::npos);
      CHECK(t.params.size() == 4);  // no type parameter drawn
    }
  using qnum_search_test::error_of;
  CHECK(error_of([] {
          NasBertSpace(small_base(), {2, 2});
        }).find("num_hidden_layers value 2 appears twice") != std::string::npos);
  CHECK(error_of([] {
          NasBertSpace(small_base(), {2}, {2}, {16}, {32}, {"linear", "conv"});
        }).find("unknown linear layer choice 'conv'") != std::string::npos);
}

TEST_CASE("search.nas_bert: the grid holds every parameter; the default space's size") {
  const NasBertSpace small(small_base(), {1, 2}, {2}, {16}, {16, 32});
  const auto g = small.grid();
  // 4 sizes + layer 0: 4 + 2 FFN (intermediate 16 == hidden) + layer 1: 4 + 2 + pooler.
  CHECK(g.size() == 4 + 6 + 6 + 1);
  CHECK(g.count("bert.encoder.layer.1.intermediate.dense_type") == 1);
  CHECK(small.architectures() ==
        doctest::Approx(std::pow(2.0, 5) + std::pow(2.0, 7) + std::pow(2.0, 9) + std::pow(2.0, 13)));
  const NasBertSpace full;  // MASE's lists: every hidden size divides by every head count
  CHECK(full.architectures() > 1e15);
  const ShuffledGridSampler sampler(full.grid(), 0);
  CHECK(sampler.size() == 300ull * (1ull << 49));  // 8 layers x 6 + pooler = 49 binary choices
}

TEST_CASE("search.shuffled_grid: a seeded permutation; every point once; stops when exhausted") {
  GridSpace space{{"a", {std::int64_t{0}, std::int64_t{1}, std::int64_t{2}}},
                  {"b", {std::string("x"), std::string("y")}},
                  {"c", {1.5, 2.5, 3.5, 4.5, 5.5}}};
  const ShuffledGridSampler s(space, 3);
  REQUIRE(s.size() == 30);
  std::set<std::uint64_t> seen;
  for (std::uint64_t g = 0; g < 30; ++g) seen.insert(s.product_index(g));
  CHECK(seen.size() == 30);
  CHECK(*seen.rbegin() == 29);
  // Product order: the last name varies fastest.
  std::uint64_t g5 = 0;
  while (s.product_index(g5) != 5) ++g5;
  CHECK(s.point(g5) == std::map<std::string, ParamValue>{{"a", std::int64_t{0}}, {"b", std::string("y")}, {"c", 1.5}});
  // Another seed, another order.
  const ShuffledGridSampler s2(space, 4);
  std::vector<std::uint64_t> o1, o2;
  for (std::uint64_t g = 0; g < 30; ++g) o1.push_back(s.product_index(g)), o2.push_back(s2.product_index(g));
  CHECK(o1 != o2);

  auto storage = std::make_shared<InMemoryStorage>();
  Study study(storage, "g", {StudyDirection::minimize}, std::make_shared<ShuffledGridSampler>(space, 3));
  std::set<std::string> points;
  study.optimize(
      [&](Trial& t) {
        const auto a = t.suggest_categorical("a", std::vector<std::int64_t>{0, 1, 2});
        const auto b = t.suggest_categorical("b", std::vector<std::string>{"x", "y"});
        const auto c = t.suggest_float("c", 1.5, 5.5, 1.0);
        points.insert(std::to_string(a) + b + std::to_string(c));
        return c;
      },
      100);
  CHECK(points.size() == 30);
  CHECK(study.get_trials().size() == 30);
  CHECK(study.best_value() == 1.5);

  using qnum_search_test::error_of;
  Study other(storage, "h", {StudyDirection::minimize}, std::make_shared<ShuffledGridSampler>(space, 3));
  other.optimize([](Trial& t) { return t.suggest_float("z", 0, 1); }, 1);
  CHECK(other.get_trials()[0].state == TrialState::fail);
  CHECK(other.get_trials()[0].system_attrs["fail_reason"].get<std::string>().find(
            "parameter name 'z' is not found in the grid") != std::string::npos);

  // A grid too large to list still samples (2^40 points).
  GridSpace big;
  for (int i = 0; i < 40; ++i) big["p" + std::to_string(100 + i)] = {std::int64_t{0}, std::int64_t{1}};
  const ShuffledGridSampler huge(big, 1);
  CHECK(huge.size() == (1ull << 40));
  CHECK(huge.product_index(0) != huge.product_index(1));
  CHECK(huge.product_index((1ull << 40) - 1) < (1ull << 40));
}
