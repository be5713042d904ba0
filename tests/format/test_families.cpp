// The one list of families (format/families.hpp): every family parses by its name and its
// aliases, presets come from their families, unknown names list what is known, and each
// family's grouping answers "may a slice be quantized on its own?".
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "error_of.hpp"
#include "qnum/format/format.hpp"

using namespace qnum;

TEST_CASE("families: each family in the list parses by its own name and reports it") {
  std::set<std::string> names;
  for_each_family([&]<class S>(std::type_identity<S>) {
    CAPTURE(S::name);
    CHECK(names.insert(std::string(S::name)).second);  // names are unique
    const Policy p = std::is_same_v<S, MXIntHardwareSpec> ? mase_compat : exact;
    const auto f = Format::parse(S::name, p);
    CHECK(std::holds_alternative<S>(f.spec));
    CHECK(f.family() == S::name);
    CHECK(!S::help.empty());
  });
  CHECK(names.size() == std::variant_size_v<AnySpec>);
  CHECK(format_families().size() == names.size());
}

TEST_CASE("families: aliases and presets resolve to their family") {
  CHECK(std::holds_alternative<FixedSpec>(Format::parse("fixed:width=8").spec));
  CHECK(Format::parse("integer_floor:width=8").policy.rounding == Rounding::floor);
  CHECK(std::holds_alternative<MinifloatSpec>(Format::parse("minifloat:width=8,exponent_width=4").spec));
  CHECK(Format::parse("fp8_e4m3").spec == AnySpec{MinifloatSpec::fp8_e4m3()});
  CHECK(std::holds_alternative<MXIntSpec>(Format::parse("mxint8").spec));
  CHECK(std::holds_alternative<MXFPSpec>(Format::parse("mxfp4_e2m1").spec));
  CHECK(format_presets().size() == 8);
  const auto msg = qnum_test::error_of([] { (void)Format::parse("integr:width=8"); });
  CHECK(msg.find("unknown format 'integr' (known: integer, ") == 0);
  for (const char* known : {"mxint_hardware", "fp8_e5m2", "mxfp4_e2m1", "fixed", "integer_floor", "minifloat"})
    CHECK(msg.find(known) != std::string::npos);
}

TEST_CASE("families: grouping says which formats are elementwise") {
  for (const char* t : {"integer", "minifloat_ieee", "minifloat_denorm", "log", "fp8_e4m3", "binary", "binarize"})
    CHECK_MESSAGE(Format::parse(t).elementwise(), t);
  CHECK(Format::parse("binary:stochastic=true").grouping() == Grouping::indexed);
  CHECK(Format::parse("binary:bipolar=false").grouping() == Grouping::per_channel);
  for (const char* t : {"block_fp", "block_minifloat", "block_log", "mxint8", "mxfp8_e4m3"})
    CHECK(Format::parse(t).grouping() == Grouping::blocked);
  CHECK(Format::parse("mxint_hardware", mase_compat).grouping() == Grouping::blocked);
  CHECK(Format::parse("ternary").grouping() == Grouping::per_channel);
  CHECK(Format::parse("scale_integer").grouping() == Grouping::per_row);
  CHECK(Format::parse("residual_sign").grouping() == Grouping::stacked);
  CHECK(!Format::parse("scale_integer").saturates());
  CHECK(Format::parse("integer").saturates());
}
