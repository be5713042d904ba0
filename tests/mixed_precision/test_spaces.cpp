// Mixed-precision search spaces and their objective: parameter names, configs keyed by
// layer name (never the by=type no-op), every family variant applied to a real model, fresh
// models and configs per trial, metrics and their combination, searches with TPE and NSGA-II.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "error_of.hpp"
#include "qnum/data/jsc.hpp"
#include "qnum/models/jsc.hpp"
#include "qnum/search/in_memory_storage.hpp"
#include "qnum/search/nsga2.hpp"
#include "qnum/search/quantized_objective.hpp"
#include "qnum/search/spaces.hpp"
#include "qnum/search/study.hpp"
#include "qnum/search/tpe.hpp"

using namespace qnum;
using namespace qnum::search;
using qnum_test::error_of;

namespace {

/// jsc-s trained for one epoch on jsc-synthetic, shared by the cases (seconds).
struct Base {
  data::JscSplits data = data::make_jsc_synthetic();
  std::map<std::string, Tensor> state;
  Base() {
    auto m = models::make_jsc_model("jsc-s", 0);
    train::TrainConfig c;
    c.max_epochs = 1;
    c.batch_size = 256;
    c.output_dir = (std::filesystem::temp_directory_path() / "qnum-mp-test-base").string();
    c.progress = false;
    train::Trainer(m, c).fit(data.train, data.val);
    state = m->state_dict();
  }
  QuantizedEvaluator evaluator() const {
    QuantizedEvaluator e;
    e.fresh_model = [this] {
      auto m = models::make_jsc_model("jsc-s", 0);
      m->load_state_dict(state);
      return std::static_pointer_cast<nn::Module>(m);
    };
    e.eval = &data.val;
    e.example = data.val.subset(std::vector<std::int64_t>{0, 1, 2, 3}).features;
    return e;
  }
};

const Base& base() {
  static Base b;
  return b;
}

}  // namespace

TEST_CASE("mixed_precision.space: integer widths per Linear, names <layer>/<key>, config keyed by name") {
  auto model = models::make_jsc_model("jsc-s", 0);
  const auto space = MixedPrecisionSpace::integer_widths(*model, ".*", {"linear"}, {8, 16, 32}, {2, 4, 8});
  REQUIRE(space.layers().size() == 5);  // jsc-s: five Linears
  CHECK(space.layers()[0].layer == "2");
  const auto grid = space.grid();
  CHECK(grid.size() == 10);
  CHECK(grid.count("2/width") == 1);
  CHECK(grid.count("2/frac_width") == 1);
  CHECK(space.size() == doctest::Approx(std::pow(9.0, 5)));

  std::map<std::string, ParamValue> point;
  for (const auto& [k, c] : grid) point[k] = c.front();
  point["2/width"] = std::int64_t{16};
  const auto cfg = space.config(point);
  CHECK(cfg["by"] == "name");
  CHECK(cfg["2"]["config"]["name"] == "integer");
  CHECK(cfg["2"]["config"]["weight_width"] == 16);
  CHECK(cfg["2"]["config"]["data_in_width"] == 16);
  CHECK(cfg["2"]["config"]["bias_frac_width"] == 2);
  const auto report = passes::quantize(*model, cfg);
  CHECK(report.changed() == 5);  // every Linear quantized: the config is never a no-op
  for (const auto& r : report.rows)
    if (r.path == "2") CHECK(r.config.find("integer:width=16,frac_width=2") != std::string::npos);

  // Regex selection, and its errors.
  CHECK(MixedPrecisionSpace::integer_widths(*model, "2|5", {"linear"}, {8}, {4}).layers().size() == 2);
  CHECK(error_of([&] {
          MixedPrecisionSpace::integer_widths(*model, "99", {"linear"}, {8}, {4});
        }).find("match no layer with op linear (candidates: 2, 5, 7, 9, 11)") != std::string::npos);
  CHECK(error_of([&] {
          MixedPrecisionSpace::integer_widths(*model, "(", {"linear"}, {8}, {4});
        }).find("bad layers regular expression") != std::string::npos);
  CHECK(error_of([&] {
          MixedPrecisionSpace::integer_widths(*model, ".*", {"linear"}, {}, {4});
        }).find("at least one choice") != std::string::npos);
  CHECK(error_of([&] { space.config({}); }).find("no value for '2/") != std::string::npos);
}

TEST_CASE("mixed_precision.space: every family variant quantizes jsc-s and gives finite metrics") {
  const auto ev = base().evaluator();
  auto model = ev.fresh_model();
  const auto families = variant_families();
  CHECK(families.size() >= 10);
  for (const auto& f :
       {"integer", "minifloat_denorm", "minifloat_ieee", "log", "block_fp", "block_minifloat", "block_log", "binary"})
    CHECK(std::find(families.begin(), families.end(), f) != families.end());
  const auto space = MixedPrecisionSpace::families(*model, ".*", {"linear"}, families, true);
  const auto labels = space.layers()[0].choices.at("format");
  const auto fp32 = ev(space.config([&] {
    std::map<std::string, ParamValue> p;
    for (const auto& l : space.layers()) p[l.layer + "/format"] = std::string("float");
    return p;
  }()));
  CHECK(fp32.quantized_layers == 0);
  CHECK(fp32.bits == fp32.float32_bits);
  for (const auto& label : labels) {
    std::map<std::string, ParamValue> p;
    for (const auto& l : space.layers()) p[l.layer + "/format"] = label;
    const auto r = ev(space.config(p));
    INFO("variant " << to_string(label));
    CHECK(std::isfinite(r.loss));
    CHECK(r.accuracy >= 0.0);
    CHECK(r.accuracy <= 1.0);
    if (std::get<std::string>(label) == "float") continue;
    CHECK(r.quantized_layers == 5);
    CHECK(r.bits < fp32.bits);  // every variant stores weights in fewer than 32 bits
    if (std::get<std::string>(label).starts_with("integer:w8")) {
      CHECK(r.bitops == doctest::Approx(fp32.bitops * (8.0 * 8.0) / (32.0 * 32.0)));
      CHECK(r.accuracy > 0.5);
    }
  }
  CHECK(error_of([] {
          variant_labels({"integer", "posit"});
        }).find("family 'posit' has no variants") != std::string::npos);
  CHECK(error_of([] { format_variant("integer:w3"); }).find("unknown format variant 'integer:w3'") !=
        std::string::npos);
}

TEST_CASE("mixed_precision.space: residual_sign gives a Linear the sum of its levels; binary_scaling scales weights") {
  // MASE's LinearBinaryResidualSign multiplies x-hat = sum of the stacked levels: the layer's
  // output is the plain Linear on that sum (exact float32 sums of the levels here).
  const Format rs = Format::parse("residual_sign:levels=2");
  const Tensor x = Tensor::uniform({3, 16}, 7, -1.5f, 1.5f, true);
  const auto levels = rs.quantize(x.values(), Shape{3, 16}, Role::activation);
  REQUIRE(levels.size() == 2 * 48);
  nn::Linear plain(16, 4, true, 3), quantized(16, 4, true, 3);
  quantized.load_state_dict(plain.state_dict());
  passes::quantize(quantized, {{"by", "type"}, {"linear", {{"config", format_variant("residual_sign:l2").config}}}});
  REQUIRE(quantized.quant().data_in);
  CHECK(quantized.quant().weight->to_string().starts_with("binary"));
  std::vector<float> summed(48);
  for (std::size_t i = 0; i < 48; ++i) summed[i] = levels[i] + levels[48 + i];
  const Tensor xhat({3, 16}, summed);
  plain.set_quant(nn::QuantConfig{std::nullopt, quantized.quant().weight, std::nullopt, std::nullopt});
  const Tensor want = plain(xhat), got = quantized(x);
  for (std::int64_t i = 0; i < want.numel(); ++i) CHECK(got.data()[i] == want.data()[i]);
  // The straight-through gradient reaches the input.
  sum(got).backward();
  REQUIRE(x.grad().size() == 48);
  CHECK(std::any_of(x.grad().begin(), x.grad().end(), [](float g) { return g != 0.0f; }));
  // binary_scaling:alpha: weights {0, alpha} per output channel, input and bias float32.
  const auto& alpha = format_variant("binary_scaling:alpha").config;
  CHECK(alpha.at("weight_bipolar") == false);
  CHECK(!alpha.contains("data_in_bipolar"));
  const auto lab3 = lab3_families();
  CHECK(lab3.size() == 10);
  for (const auto& f : lab3) CHECK_NOTHROW(variant_labels({f}));
}

TEST_CASE("mixed_precision.objective: fresh model and config per trial; metrics combine as configured") {
  const auto ev = base().evaluator();
  auto probe = ev.fresh_model();
  const auto space = MixedPrecisionSpace::integer_widths(*probe, ".*", {"linear"}, {8, 16, 32}, {2, 4, 8});
  std::map<std::string, ParamValue> narrow, wide;
  for (const auto& [k, c] : space.grid()) narrow[k] = c.front(), wide[k] = c.back();
  const auto a = ev(space.config(narrow));
  const auto b = ev(space.config(wide));
  const auto a2 = ev(space.config(narrow));  // the same point later: the same metrics
  CHECK(a.accuracy == a2.accuracy);
  CHECK(a.loss == a2.loss);
  CHECK(a.bits < b.bits);
  CHECK(a.bitops < b.bitops);
  // The base model itself is never quantized by a trial.
  CHECK(passes::quantize(*ev.fresh_model(), {{"by", "type"}}).changed() == 0);

  const std::vector<Metric> metrics{{"accuracy", StudyDirection::maximize, 1.0},
                                    {"average_bitwidth", StudyDirection::minimize, 0.01}};
  const auto v = objective_values(a, metrics, false);
  REQUIRE(v.size() == 2);
  CHECK(v[0] == a.accuracy);
  CHECK(v[1] == doctest::Approx(0.01 * a.bits / a.parameters));
  CHECK(objective_values(a, metrics, true)[0] == doctest::Approx(v[0] - v[1]));
  CHECK(objective_directions(metrics, true) == std::vector<StudyDirection>{StudyDirection::maximize});
  CHECK(objective_directions(metrics, false).size() == 2);
  CHECK(error_of([&] { a.get("latency"); }).find("unknown metric 'latency'") != std::string::npos);
}

TEST_CASE("mixed_precision.search: TPE records params and metrics; NSGA-II gives a Pareto front") {
  const auto ev = base().evaluator();
  auto probe = ev.fresh_model();
  const auto space = MixedPrecisionSpace::integer_widths(*probe, ".*", {"linear"}, {8, 16, 32}, {2, 4, 8});
  Study s(std::make_shared<InMemoryStorage>(), "tpe", {StudyDirection::maximize}, std::make_shared<TPESampler>(3));
  s.optimize(
      [&](Trial& t) {
        const auto cfg = space.sample(t);
        const auto r = ev(cfg);
        t.set_user_attr("metrics", r.to_json());
        return r.accuracy;
      },
      12);
  const auto trials = s.get_trials();
  REQUIRE(trials.size() == 12);
  for (const auto& t : trials) {
    CHECK(t.state == TrialState::complete);
    CHECK(t.params.size() == 10);
    CHECK(t.user_attrs["metrics"]["accuracy"].get<double>() == t.values[0]);
  }

  const std::vector<Metric> metrics{{"accuracy", StudyDirection::maximize, 1.0},
                                    {"bits", StudyDirection::minimize, 1.0}};
  NSGAIIOptions o;
  o.population_size = 4;
  Study m(std::make_shared<InMemoryStorage>(), "nsga", objective_directions(metrics, false),
          std::make_shared<NSGAIISampler>(1, o));
  m.optimize([&](Trial& t) { return objective_values(ev(space.sample(t)), metrics, false); }, 10);
  const auto front = m.best_trials();
  REQUIRE(!front.empty());
  for (const auto& p : front)
    for (const auto& q : m.get_trials({TrialState::complete})) {
      const bool dominated = (q.values[0] > p.values[0] && q.values[1] <= p.values[1]) ||
                             (q.values[0] >= p.values[0] && q.values[1] < p.values[1]);
      CHECK_FALSE(dominated);
    }
}
