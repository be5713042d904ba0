// MASE's search section as qnum runs it (qnum/search/mase_space.hpp, quantized_objective.hpp):
// seed tables and "NA" expansion, setup.by = "name" vs "type" (by type quantizes every layer
// of the op — MASE's evaluates the unquantized model), metric scaling and direction, memory
// density, and the Pareto front of a two-objective study.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "qnum/data/jsc.hpp"
#include "qnum/pipeline/registry.hpp"
#include "qnum/search/in_memory_storage.hpp"
#include "qnum/search/mase_space.hpp"
#include "qnum/search/quantized_objective.hpp"
#include "qnum/search/random_sampler.hpp"
#include "qnum/search/study.hpp"

using namespace qnum;
using namespace qnum::search;
using nlohmann::json;
using qnum_search_test::error_of;

namespace {

/// The seed tables of MASE's jsc_toy_by_type.toml: default "NA", a seed for every linear
/// layer (used by type) and one for seq_blocks_2 (used by name).
json toy_by_type_seed() {
  const json choices = {{"name", {"integer"}},       {"data_in_width", {4, 8}},     {"data_in_frac_width", {"NA"}},
                        {"weight_width", {2, 4, 8}}, {"weight_frac_width", {"NA"}}, {"bias_width", {2, 4, 8}},
                        {"bias_frac_width", {"NA"}}};
  return {{"default", {{"config", {{"name", {"NA"}}}}}},
          {"linear", {{"config", choices}}},
          {"seq_blocks_2", {{"config", choices}}}};
}

std::vector<std::string> names_of(const GridSpace& g) {
  std::vector<std::string> out;
  for (const auto& [k, c] : g) out.push_back(k);
  return out;
}

/// The quantize config of the space's first choices.
json first_point(const MixedPrecisionSpace& space) {
  std::map<std::string, ParamValue> point;
  for (const auto& [k, c] : space.grid()) point[k] = c.front();
  return space.config(point);
}

std::size_t quantized_layers(const json& qconfig) {
  auto m = models::make_toy_model(0);
  return passes::quantize(*m, qconfig).changed();
}

}  // namespace

TEST_CASE("mase_search: toy is MASE's ToyNet, registered by name") {
  const auto c = pipeline::make_classifier("toy");
  std::vector<std::string> linear;
  for (const auto& [path, m] : c.module->named_modules())
    if (m->op_name() == "linear") linear.push_back(passes::node_name(path));
  CHECK(linear == std::vector<std::string>{"0", "2", "4"});  // seq_blocks_0, _2, _4 in MASE
  std::size_t params = 0;
  for (const auto& [n, t] : c.module->state_dict()) params += static_cast<std::size_t>(t.numel());
  CHECK(params == 16 * 8 + 8 + 8 * 8 + 8 + 8 * 5 + 5);
  CHECK(pipeline::known_model_names().find("toy") != std::string::npos);
}

TEST_CASE("mase_search: \"NA\" frac widths are width // 2; a name of \"NA\" leaves the layer alone") {
  json c = {{"name", "integer"},         {"data_in_width", 7},      {"data_in_frac_width", "NA"}, {"weight_width", 8},
            {"weight_frac_width", "NA"}, {"bias_frac_width", "NA"}, {"data_out_frac_width", 3}};
  expand_na_frac_widths(c);
  CHECK(c["data_in_frac_width"] == 3);
  CHECK(c["weight_frac_width"] == 4);
  CHECK(c["bias_frac_width"] == "NA");  // no bias_width: the format's own default applies
  CHECK(c["data_out_frac_width"] == 3);

  auto m = models::make_toy_model(0);
  const json all_na = {{"default", {{"config", {{"name", {"NA"}}}}}}};
  CHECK(error_of([&] {
          mase_seed_space(*m, all_na, SeedBy::name, ".*", passes::mase_quantizable_ops());
        }).find("leave no layer to search") != std::string::npos);
}

TEST_CASE("mase_search: by = \"name\" searches the named layer alone, with its own parameters") {
  auto m = models::make_toy_model(0);
  std::vector<std::string> notes;
  const auto space =
      mase_seed_space(*m, toy_by_type_seed(), SeedBy::name, ".*", passes::mase_quantizable_ops(), &notes);
  REQUIRE(space.layers().size() == 1);
  CHECK(space.layers()[0].layer == "2");
  CHECK(names_of(space.grid()) == std::vector<std::string>{"2/bias_width", "2/data_in_width", "2/weight_width"});
  CHECK(space.size() == 2 * 3 * 3);
  const json q = first_point(space);
  CHECK(q["by"] == "name");
  CHECK(q["2"]["config"]["data_in_width"] == 4);
  CHECK(q["2"]["config"]["data_in_frac_width"] == 2);  // "NA": 4 // 2
  CHECK(q["2"]["config"]["weight_frac_width"] == 1);   // "NA": 2 // 2
  CHECK(!q.contains("0"));
  CHECK(quantized_layers(q) == 1);
  // seed.linear is an op: MASE uses it only by type; said, not silently dropped.
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("seed.linear is an op") != std::string::npos);
}

TEST_CASE("mase_search: by = \"type\" searches one config per op and quantizes every layer of it") {
  auto m = models::make_toy_model(0);
  std::vector<std::string> notes;
  const auto space =
      mase_seed_space(*m, toy_by_type_seed(), SeedBy::type, ".*", passes::mase_quantizable_ops(), &notes);
  REQUIRE(space.layers().size() == 1);  // relu falls back to default = "NA"
  CHECK(space.layers()[0].layer == "linear");
  CHECK(space.layers()[0].members == std::vector<std::string>{"0", "2", "4"});
  CHECK(names_of(space.grid()) ==
        std::vector<std::string>{"linear/bias_width", "linear/data_in_width", "linear/weight_width"});
  const json q = first_point(space);
  for (const char* layer : {"0", "2", "4"}) CHECK(q[layer]["config"]["weight_frac_width"] == 1);
  // MASE's quirk would quantize nothing here; qnum quantizes the three linear layers.
  CHECK(quantized_layers(q) == 3);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("seed.seq_blocks_2 is a layer name") != std::string::npos);

  // A default of choices covers every quantizable op of the model: linear and relu groups.
  const json seed = {
      {"default", {{"config", {{"name", {"integer"}}, {"data_in_width", {4, 8}}, {"weight_width", 8}}}}}};
  const auto all = mase_seed_space(*m, seed, SeedBy::type, ".*", passes::mase_quantizable_ops());
  REQUIRE(all.layers().size() == 2);
  CHECK(all.layers()[1].layer == "relu");
  CHECK(all.layers()[1].members == std::vector<std::string>{"1", "3"});
  CHECK(quantized_layers(first_point(all)) == 5);
  const auto by_name = mase_seed_space(*m, seed, SeedBy::name, ".*", passes::mase_quantizable_ops());
  CHECK(by_name.layers().size() == 5);  // one parameter set per layer
  CHECK(by_name.grid().size() == 5);
}

TEST_CASE("mase_search: a search by type evaluates quantized models, each trial on a fresh copy") {
  auto data = data::make_jsc_synthetic({.train = 64, .val = 64, .test = 16, .seed = 0});
  const auto base = models::make_toy_model(3)->state_dict();
  QuantizedEvaluator ev;
  ev.fresh_model = [&] {
    auto m = models::make_toy_model(0);
    m->load_state_dict(base);
    return std::static_pointer_cast<nn::Module>(m);
  };
  ev.eval = &data.val;
  ev.compare_to = 32;
  auto probe = ev.fresh_model();
  const auto space = mase_seed_space(*probe, toy_by_type_seed(), SeedBy::type, ".*", passes::mase_quantizable_ops());
  Study s(std::make_shared<InMemoryStorage>(), "by-type", {StudyDirection::maximize},
          std::make_shared<RandomSampler>(1));
  s.optimize(
      [&](Trial& t) {
        const auto r = ev(space.sample(t));
        t.set_user_attr("layers", static_cast<std::int64_t>(r.quantized_layers));
        t.set_user_attr("density", r.memory_density());
        t.set_user_attr("avg", r.average_bitwidth());
        return r.accuracy;
      },
      4);
  for (const auto& t : s.get_trials()) {
    CHECK(t.user_attrs["layers"] == 3);
    const double avg = t.user_attrs["avg"].get<double>();
    CHECK(avg < 8.0);  // float32 would be 32
    CHECK(t.user_attrs["density"].get<double>() == doctest::Approx(32.0 / avg));
  }
}

TEST_CASE("mase_search: metric scales and directions; a sum follows the study's direction") {
  QuantizedMetrics r;
  r.accuracy = 0.75;
  r.loss = 0.5;
  r.bits = 400;
  r.parameters = 100;  // 4 bits per parameter
  r.compare_to = 16;
  CHECK(r.average_bitwidth() == 4.0);
  CHECK(r.memory_density() == 4.0);
  CHECK(r.get("memory_density") == 4.0);
  const std::vector<Metric> metrics{{"accuracy", StudyDirection::maximize, 1.0},
                                    {"average_bitwidth", StudyDirection::minimize, 0.2},
                                    {"loss", StudyDirection::minimize, 2.0}};
  const json scaled = scaled_metrics(r, metrics);
  CHECK(scaled["accuracy"] == 0.75);
  CHECK(scaled["average_bitwidth"].get<double>() == doctest::Approx(0.8));
  CHECK(scaled["loss"] == 1.0);
  CHECK(objective_values(r, metrics, false) == std::vector<double>{0.75, 0.2 * 4.0, 1.0});
  // Maximized sum: metrics to minimize count negatively; a minimized sum: the reverse.
  CHECK(objective_values(r, metrics, true)[0] == doctest::Approx(0.75 - 0.8 - 1.0));
  CHECK(objective_values(r, metrics, true, StudyDirection::minimize)[0] == doctest::Approx(-0.75 + 0.8 + 1.0));
  CHECK(objective_directions(metrics, true, StudyDirection::minimize) ==
        std::vector<StudyDirection>{StudyDirection::minimize});
  CHECK(objective_directions(metrics, false) ==
        std::vector<StudyDirection>{StudyDirection::maximize, StudyDirection::minimize, StudyDirection::minimize});
  CHECK(error_of([&] { r.get("perplexity"); }).find("memory_density") != std::string::npos);
}

TEST_CASE("mase_search: sum_scaled_metrics = false reports the Pareto front") {
  // (accuracy, average bitwidth): trial 2 is dominated by 0, trial 4 by 1.
  const std::vector<std::vector<double>> values{{0.9, 8}, {0.8, 4}, {0.85, 8}, {0.7, 2}, {0.7, 4}};
  const std::vector<Metric> metrics{{"accuracy", StudyDirection::maximize, 1.0},
                                    {"average_bitwidth", StudyDirection::minimize, 1.0}};
  Study s(std::make_shared<InMemoryStorage>(), "pareto", objective_directions(metrics, false),
          std::make_shared<RandomSampler>(0));
  s.optimize([&](Trial& t) { return values[static_cast<std::size_t>(t.number())]; }, 5);
  std::set<std::int64_t> front;
  for (const auto& t : s.best_trials()) front.insert(t.number);
  CHECK(front == std::set<std::int64_t>{0, 1, 3});
}
