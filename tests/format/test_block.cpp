// Block formats, shared machinery: MASE's block-shape inference (spec §1.1 table), the exact
// tile layout, the index mapping, and MASE's zero-block rule. Family tests live in
// test_block_fp.cpp, test_block_minifloat.cpp and test_block_log.cpp.
#include <doctest/doctest.h>

#include "format/conformance.hpp"

#include <cmath>
#include <set>
#include <string>

#include "qnum/format/block.hpp"
#include "qnum/format/block_fp.hpp"

using namespace qnum;

namespace {
Shape mase_tile(const Shape& shape, std::vector<int> bs, Role role) {
  return mase_block_layout("block_fp", shape, bs, role).tile;
}
}  // namespace

TEST_CASE("block layout: MASE inference table (spec 1.1)") {
  // weight [out, in]: [16] is a strip of 16 columns spanning every row
  CHECK(mase_tile({24, 40}, {16}, Role::weight) == Shape{24, 16});
  CHECK(mase_tile({24, 40}, {1, 16}, Role::weight) == Shape{1, 16});
  CHECK(mase_tile({24, 40}, {4, 8}, Role::weight) == Shape{4, 8});
  CHECK(mase_tile({24, 40}, {-1, 8}, Role::weight) == Shape{24, 8});
  CHECK(mase_tile({24, 40}, {100, 100}, Role::weight) == Shape{24, 40});  // larger than the dim: whole dim
  CHECK(mase_tile({24, 40}, {7, 1, 16}, Role::weight) == Shape{1, 16});   // extra leading entries dropped
  // bias: consecutive biases
  CHECK(mase_tile({100}, {16}, Role::bias) == Shape{16});
  CHECK(mase_tile({100}, {1, 16}, Role::bias) == Shape{16});
  CHECK(mase_tile({100}, {-1}, Role::bias) == Shape{100});
  CHECK(mase_tile({10}, {16}, Role::bias) == Shape{10});
  // a bias role on a 2-D tensor is the weight path (skip_first_dim=False)
  CHECK(mase_tile({24, 40}, {16}, Role::bias) == Shape{24, 16});
  // activation 2-D: batch dim always 1
  CHECK(mase_tile({8, 100}, {16}, Role::activation) == Shape{1, 16});
  CHECK(mase_tile({8, 100}, {1, 16}, Role::activation) == Shape{1, 16});
  CHECK(mase_tile({8, 100}, {4, 16}, Role::activation) == Shape{1, 16});
  CHECK(mase_tile({8, 10}, {16}, Role::activation) == Shape{1, 10});
  // activation 3-D: [16] spans all tokens of a sample
  CHECK(mase_tile({3, 8, 64}, {16}, Role::activation) == Shape{1, 8, 16});
  CHECK(mase_tile({3, 8, 64}, {1, 16}, Role::activation) == Shape{1, 1, 16});
  CHECK(mase_tile({3, 8, 64}, {4, 8}, Role::activation) == Shape{1, 4, 8});
  CHECK(mase_tile({3, 8, 64}, {5, 4, 8}, Role::activation) == Shape{1, 4, 8});
  // which paths unblock with F.fold (turns -0 into +0)
  CHECK(mase_block_layout("f", {24, 40}, std::vector<int>{16}, Role::weight).mase_fold);
  CHECK(mase_block_layout("f", {2, 3, 40}, std::vector<int>{16}, Role::activation).mase_fold);
  CHECK_FALSE(mase_block_layout("f", {8, 40}, std::vector<int>{16}, Role::activation).mase_fold);
  CHECK_FALSE(mase_block_layout("f", {40}, std::vector<int>{16}, Role::bias).mase_fold);
}

TEST_CASE("block layout: MASE rejects what it cannot block") {
  const std::vector<int> bs{16};
  const auto w3 = qnum_test::error_of([&] { (void)mase_block_layout("block_fp", {2, 12, 40}, bs, Role::weight); });
  CHECK(w3.find("block_fp: 3-D weight blocking is not supported") == 0);
  const auto d4 = qnum_test::error_of([&] {
    (void)mase_block_layout("block_log", {2, 2, 3, 4}, bs, Role::activation);
  });
  CHECK(d4.find("block_log: 4-D tensor") == 0);
  const auto a1 = qnum_test::error_of([&] { (void)mase_block_layout("block_minifloat", {16}, bs, Role::activation); });
  CHECK(a1.find("block_minifloat: a 1-D tensor is blocked as a bias") == 0);
  CHECK_THROWS_AS((void)mase_block_layout("block_fp", {}, bs, Role::weight), Error);
  // the same through quantize
  const BlockFPSpec s;
  std::vector<float> x(2 * 12 * 40, 1.0f), y(x.size());
  CHECK_THROWS_WITH_AS(quantize(s, mase_compat, x, y, {2, 12, 40}, Role::weight),
                       doctest::Contains("3-D weight blocking is not supported"), Error);
  CHECK_NOTHROW(quantize(s, exact, x, y, {2, 12, 40}, Role::weight));  // exact: role ignored
}

TEST_CASE("block layout: exact tiles are explicit and role-free") {
  const std::vector<int> b16{16}, b2x8{2, 8}, bm1{-1}, bm1x4{-1, 4};
  CHECK(exact_block_layout({24, 40}, b16).tile == Shape{1, 16});
  CHECK(exact_block_layout({3, 8, 64}, b16).tile == Shape{1, 1, 16});
  CHECK(exact_block_layout({24, 40}, b2x8).tile == Shape{2, 8});
  CHECK(exact_block_layout({24, 40}, bm1).tile == Shape{1, 40});
  CHECK(exact_block_layout({24, 40}, bm1x4).tile == Shape{24, 4});
  CHECK(exact_block_layout({100}, b2x8).tile == Shape{8});
  CHECK(exact_block_layout({5}, b16).tile == Shape{5});
  CHECK(exact_block_layout({}, b16).tile == Shape{});
  const auto L = exact_block_layout({5, 37}, b2x8);
  CHECK(L.blocks_along(0) == 3);
  CHECK(L.blocks_along(1) == 5);
  CHECK(L.num_blocks() == 15);
  CHECK(L.block_capacity() == 16);
}

TEST_CASE("block layout: tiles cover every element once, in block order, matching block_of") {
  const std::vector<std::pair<Shape, std::vector<int>>> cases{
      {{5, 37}, {2, 8}}, {{3, 7, 10}, {2, 3, 4}}, {{100}, {16}}, {{4, 4}, {-1}}, {{}, {16}}, {{2, 0, 3}, {2}}};
  for (const auto& [shape, bs] : cases) {
    CAPTURE(to_string(shape));
    const auto L = exact_block_layout(shape, bs);
    std::vector<int> seen(static_cast<std::size_t>(numel(shape)), 0);
    std::int64_t expect_block = 0;
    bool ok = true;
    for_each_tile(L, [&](std::int64_t b, std::span<const std::int64_t> idx) {
      ok &= b == expect_block++;
      ok &= static_cast<std::int64_t>(idx.size()) <= L.block_capacity();
      for (std::size_t j = 0; j < idx.size(); ++j) {
        ++seen[static_cast<std::size_t>(idx[j])];
        ok &= L.block_of(idx[j]) == b;
        if (j) ok &= idx[j] > idx[j - 1];  // C order within a tile
      }
    });
    CHECK(ok);
    CHECK(expect_block == (numel(shape) ? L.num_blocks() : 0));
    for (int c : seen) CHECK(c == 1);
    const auto ids = block_ids(L);
    for (std::size_t i = 0; i < ids.size(); ++i) CHECK(ids[i] == L.block_of(static_cast<std::int64_t>(i)));
  }
}

TEST_CASE("block layout: MASE zero-block rule") {
  const auto L = mase_block_layout("f", {4, 4}, std::vector<int>{4}, Role::activation);  // rows
  SUBCASE("all zero -> all maxima 1") {
    const std::vector<float> x(16, 0.0f);
    CHECK(detail::mase_block_maxima(L, x) == std::vector<float>{1, 1, 1, 1});
  }
  SUBCASE("zero blocks take the smallest non-zero block max") {
    const std::vector<float> x{0, 0, 0, 0, 1, -3, 2, 0, 0, 0, 0, 0, 0.5f, 0.25f, -0.75f, 0};
    CHECK(detail::mase_block_maxima(L, x) == std::vector<float>{0.75f, 3, 0.75f, 0.75f});
  }
  SUBCASE("a NaN block makes the maximum NaN, and poisons every zero block") {
    const std::vector<float> x{0, 0, 0, 0, 1, NAN, 2, 0, 0, 0, 0, 0, 0.5f, 0.25f, -0.75f, INFINITY};
    const auto m = detail::mase_block_maxima(L, x);
    CHECK(std::isnan(m[0]));
    CHECK(std::isnan(m[1]));
    CHECK(std::isnan(m[2]));
    CHECK(std::isinf(m[3]));
  }
}

TEST_CASE("block layout: exact zero blocks are independent (no cross-block coupling)") {
  const BlockFPSpec s{8, 8, std::nullopt, {4}};
  const std::vector<float> x{0, 0, 0, 0, 1, 0.5f, 0.25f, 3};
  std::vector<float> y(x.size());
  quantize(s, exact, x, y, {8});
  for (int i = 0; i < 4; ++i) CHECK(y[static_cast<std::size_t>(i)] == 0.0f);
  for (int i = 4; i < 8; ++i) CHECK(y[static_cast<std::size_t>(i)] == x[static_cast<std::size_t>(i)]);
}
