// Distributions: Optuna's validation rules and messages, high adjustment, internal
// representation, and distribution_json byte for byte (strings taken from an Optuna 5.0.0
// database).
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "qnum/search/distributions.hpp"
#include "qnum/search/json_text.hpp"
#include "search/helpers.hpp"

using namespace qnum::search;
using qnum_search_test::error_of;

TEST_CASE("search.distributions: Optuna's validation rules name the bad value") {
  CHECK(error_of([] { FloatDistribution(1.0, 0.0); }).find("`low <= high` must hold, but got (low=1.0, high=0.0)") !=
        std::string::npos);
  CHECK(error_of([] { FloatDistribution(0.0, 1.0, true); }).find("`low > 0` must hold for `log=True`") !=
        std::string::npos);
  CHECK(error_of([] { FloatDistribution(0.1, 1.0, true, 0.1); }).find("`step` is not supported when `log` is true") !=
        std::string::npos);
  CHECK(error_of([] { FloatDistribution(0.0, 1.0, false, 0.0); }).find("`step > 0` must hold, but got step=0.0") !=
        std::string::npos);
  CHECK(error_of([] { IntDistribution(5, 2); }).find("(low=5, high=2)") != std::string::npos);
  CHECK(error_of([] { IntDistribution(0, 8, true); }).find("`low >= 1` must hold for `log=True`") != std::string::npos);
  CHECK(error_of([] { IntDistribution(1, 8, true, 2); }).find("step must be 1 when `log` is true") !=
        std::string::npos);
  CHECK(error_of([] { IntDistribution(1, 8, false, -1); }).find("`step > 0` must hold, but got step=-1") !=
        std::string::npos);
  CHECK(error_of([] { CategoricalDistribution({}); }).find("must contain one or more elements") != std::string::npos);
  CHECK(error_of([] { FloatDistribution(0.0, 1.0); }).empty());
}

TEST_CASE("search.distributions: high is lowered to low + k*step in decimal arithmetic") {
  CHECK(FloatDistribution(0.0, 1.0, false, 0.3).high == 0.9);  // Decimal: 0.9, not 0.8999999999999999
  CHECK(FloatDistribution(0.1, 1.0, false, 0.3).high == 1.0);
  CHECK(FloatDistribution(0.0, 1.0, false, 0.25).high == 1.0);
  CHECK(IntDistribution(1, 10, false, 4).high == 9);
  CHECK(IntDistribution(-3, 3, false, 2).high == 3);
  CHECK(single(Distribution(FloatDistribution(0.0, 0.2, false, 0.3))));
  CHECK(!single(Distribution(FloatDistribution(0.0, 0.3, false, 0.3))));
  CHECK(single(Distribution(IntDistribution(1, 2, false, 2))));
  CHECK(single(Distribution(CategoricalDistribution({std::string("a")}))));
}

TEST_CASE("search.distributions: internal representation") {
  const Distribution f = FloatDistribution(0.0, 1.0);
  const Distribution i = IntDistribution(1, 10, true);
  const Distribution c = CategoricalDistribution({std::monostate{}, true, std::int64_t{1}, 2.5, std::string("s")});
  CHECK(to_internal(f, 0.25) == 0.25);
  CHECK(to_internal(i, std::int64_t{7}) == 7.0);
  CHECK(to_internal(c, std::string("s")) == 4.0);
  CHECK(to_internal(c, 2.5) == 3.0);
  CHECK(to_internal(c, std::monostate{}) == 0.0);
  CHECK(to_internal(c, true) == 1.0);  // Python: True == 1 and True is found first
  CHECK(std::get<std::string>(to_external(c, 4.0)) == "s");
  CHECK(std::get<std::int64_t>(to_external(i, 7.0)) == 7);
  CHECK(error_of([&] { to_internal(c, std::string("x")); }).find("'x' not in (None, True, 1, 2.5, 's')") !=
        std::string::npos);
  CHECK(error_of([&] { to_internal(i, std::int64_t{0}); }).find("invalid value for log=True") != std::string::npos);
  CHECK(error_of([&] { to_internal(f, std::nan("")); }).find("nan") != std::string::npos);
  CHECK(contains(Distribution(FloatDistribution(0.0, 1.0, false, 0.25)), 0.75));
  CHECK(!contains(Distribution(FloatDistribution(0.0, 1.0, false, 0.25)), 0.7));
  CHECK(contains(Distribution(IntDistribution(1, 9, false, 2)), 5.0));
  CHECK(!contains(Distribution(IntDistribution(1, 9, false, 2)), 4.0));
}

TEST_CASE("search.distributions: distribution_json is Optuna's text, and round-trips") {
  // These strings are what Optuna 5.0.0 wrote to trial_params.distribution_json.
  const std::string f =
      R"({"name": "FloatDistribution", "attributes": {"step": null, "low": 0.0, "high": 1.0, "log": false}})";
  const std::string fs =
      R"({"name": "FloatDistribution", "attributes": {"step": 0.25, "low": 0.0, "high": 1.0, "log": false}})";
  const std::string i = R"({"name": "IntDistribution", "attributes": {"log": true, "step": 1, "low": 1, "high": 10}})";
  const std::string c = R"({"name": "CategoricalDistribution", "attributes": {"choices": [null, true, 1, 2.5, "s"]}})";
  CHECK(distribution_to_json(FloatDistribution(0.0, 1.0)) == f);
  CHECK(distribution_to_json(FloatDistribution(0.0, 1.0, false, 0.25)) == fs);
  CHECK(distribution_to_json(IntDistribution(1, 10, true)) == i);
  CHECK(distribution_to_json(
            CategoricalDistribution({std::monostate{}, true, std::int64_t{1}, 2.5, std::string("s")})) == c);
  for (const auto& s : {f, fs, i, c}) CHECK(distribution_to_json(distribution_from_json(s)) == s);
  // Pre-3.0 names convert as Optuna converts them.
  CHECK(distribution_to_json(distribution_from_json(
            R"({"name": "LogUniformDistribution", "attributes": {"low": 0.001, "high": 1.0}})")) ==
        R"({"name": "FloatDistribution", "attributes": {"step": null, "low": 0.001, "high": 1.0, "log": true}})");
  CHECK(error_of([] { distribution_from_json(R"({"name": "Gaussian", "attributes": {}})"); }).find("'Gaussian'") !=
        std::string::npos);
  CHECK(error_of([] {
          distribution_from_json(R"({"name": "IntDistribution", "attributes": {"low": 3, "high": 1}})");
        }).find("(low=3, high=1)") != std::string::npos);
}

TEST_CASE("search.json_text: Python's json.dumps and float repr") {
  CHECK(python_float_repr(0.1) == "0.1");
  CHECK(python_float_repr(1.0) == "1.0");
  CHECK(python_float_repr(-2.5) == "-2.5");
  CHECK(python_float_repr(1e16) == "1e+16");
  CHECK(python_float_repr(1.5e-5) == "1.5e-05");
  CHECK(python_float_repr(0.0001) == "0.0001");
  CHECK(python_float_repr(123456789012345.0) == "123456789012345.0");
  CHECK(python_float_repr(0.3989422804014327) == "0.3989422804014327");
  CHECK(python_json_dumps(nlohmann::json{{"k", {1, 2}}, {"a", "é\n"}}) == R"({"a": "\u00e9\n", "k": [1, 2]})");
  const auto j = python_json_loads(R"({"x": NaN, "y": [Infinity, -Infinity], "s": "NaN"})");
  CHECK(std::isnan(j["x"].get<double>()));
  CHECK(j["y"][0].get<double>() == HUGE_VAL);
  CHECK(j["s"].get<std::string>() == "NaN");
  CHECK(python_json_dumps(j) == R"({"s": "NaN", "x": NaN, "y": [Infinity, -Infinity]})");
}
