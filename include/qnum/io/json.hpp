// JSON that qnum reads from outside (configs, checkpoint metadata, config.json, safetensors
// headers, study rows, downloaded descriptions) is parsed by parse_json: nlohmann's parser
// with the nesting bounded. nlohmann parses and destroys a value without recursion, but
// copying, comparing and dumping one recurse, so a file nested a million levels deep would
// parse and then overflow the stack wherever it is copied (fuzz_pass_config,
// docs/reliability.md finding 15).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"

namespace qnum::io {

/// How deep objects and arrays may nest in JSON that qnum reads: its own files nest a few
/// levels, MASE's and Hugging Face's configs fewer than ten.
inline constexpr int kMaxJsonDepth = 128;

/// nlohmann::json::parse(text, callback, allow_exceptions), refusing nesting deeper than
/// kMaxJsonDepth with a qnum::Error "WHERE: nests deeper than 128 levels" (whatever
/// allow_exceptions says: no caller can use such a value). `callback`, when given, is
/// nlohmann's parser callback, called for every event as without the bound. The check costs
/// ~0.7 µs per small document (docs/reliability.md, finding 15).
inline nlohmann::json parse_json(std::string_view text, std::string_view where, bool allow_exceptions = true,
                                 const nlohmann::json::parser_callback_t& callback = nullptr) {
  using Event = nlohmann::json::parse_event_t;
  return nlohmann::json::parse(
      text,
      [&](int depth, Event event, nlohmann::json& value) {
        // depth: the containers around this event, so an opening one at kMaxJsonDepth is one too many
        if ((event == Event::object_start || event == Event::array_start) && depth >= kMaxJsonDepth)
          qnum::detail::fail(where, ": nests deeper than ", kMaxJsonDepth, " levels");
        return callback ? callback(depth, event, value) : true;
      },
      allow_exceptions);
}

}  // namespace qnum::io
