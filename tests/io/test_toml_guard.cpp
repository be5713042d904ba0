// io/toml_guard.hpp: TOML with non-ASCII text only where TOML allows it passes; non-ASCII
// where toml++ 3.3.0 would test it for whitespace (undefined behaviour there) is refused
// with FILE:LINE:COLUMN. The refused inputs are the fuzz findings that reached toml++'s
// __builtin_unreachable() before the check existed.
#include <doctest/doctest.h>

#include <string>

#include "qnum/core/error.hpp"
#include "qnum/io/toml_guard.hpp"

using qnum::io::check_toml_text;

TEST_CASE("toml guard: non-ASCII inside strings and comments passes") {
  for (const char* doc : {
           "a = \"\xc3\xa9\"\n",
           "name = 'r\xc3\xa9sum\xc3\xa9'  # \xc3\xbc comment \xe2\x80\x94 dash\n",
           "# \xc3\xa9 first line\n[table]\n\"k\xc3\xa9\" = 1\n",
           "a.\"\xc3\xa9\" = 1\n[\"\xc3\xbc\".b]\nx = 2\n",
           "arr = [\n  \"\xc3\xa9\",\n  '\xc3\xbc',  # \xc3\xa9\n]\n",
           "t = { x = \"\xc3\xa9\", \"\xc3\xbc\" = 2, y = [1, \"\xc3\xa9\"] }\n",
           "s = \"\"\"\nmulti \xc3\xa9\n\"\"\"\nl = '''\n\xc3\xa9 ''' \n",
           "s = \"\"\"a \"\"\xc3\xa9\"\"\"\"\"\ny = \"\xc3\xa9\"\n",
           "d = 1979-05-27 # \xc3\xa9\nx = \"\"\ny = \"\xc3\xa9\"\n",
           "\xef\xbb\xbf" "a = 1\n",
           "[[arr]]\nname = \"\xc3\xa9\"\n[[arr]]\nname = 'x'\n",
           "e = \"esc \\\" \xc3\xa9\"\n",
       }) {
    CAPTURE(doc);
    CHECK_NOTHROW(check_toml_text(doc, "c.toml"));
  }
}

TEST_CASE("toml guard: non-ASCII where toml++ tests for whitespace is refused") {
  const std::string msg =
      "TOML: a non-ASCII character outside a string (TOML allows it only inside strings and comments)";
  CHECK_THROWS_WITH_AS(check_toml_text("a = 1\xc2\xa7\n", "c.toml"), ("c.toml:1:6: " + msg).c_str(), qnum::Error);
  CHECK_THROWS_WITH_AS(check_toml_text("x = 1\n\xc2\xa7" "a = 1\n", "c.toml"), ("c.toml:2:1: " + msg).c_str(),
                       qnum::Error);
  for (const char* doc : {
           "a = [1,\xc2\xa7 2]\n",         // between array items
           "a \xc2\xa7= 1\n",              // between a key and '='
           "a = \xe3\x80\x80 1\n",         // ideographic space before a value
           "a = 1\"\xc2\xa7 \" # x\n",     // a quote glued to a bare value starts no string
           "a = 1 \"\xc2\xa7\"\n",         // nor one after a bare value
           "a = 1e-\"x\"YY['\xef\xbb\xbf@YY\n",  // '[' and a quote inside a bare value
           "a\"\xc2\xa7\" = 1\n",          // a quote glued to a bare key
           "s = \"\"\"\\\n\xc2\xa7\"\"\"\n",   // after a line-ending backslash (tomlplusplus#190)
           "s = \"\"\"\\\n\\\xc2\xa7\"\"\"\n", // after a backslash
           "a = \"x\"\xc2\xa7\n",          // right after a string
       }) {
    CAPTURE(doc);
    CHECK_THROWS_AS(check_toml_text(doc, "c.toml"), qnum::Error);
  }
}
