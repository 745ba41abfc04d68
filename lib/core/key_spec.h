// key_spec.h: the common start of a schema key (KeySpec, core/config.h) for code that builds its own KeySpecs
// rather than through Schema's add_* shorthands (which use it too).
#pragma once

#include <optional>
#include <string>

#include "core/config.h"

namespace prophet {

// A key's name, type, bounds (numbers and number-list elements) and help, with no default and not required:
// the caller completes it (a default, `required`, choices).
KeySpec bounded_key(const std::string& key, ValueType type, std::optional<double> min, std::optional<double> max,
                    bool min_exclusive, const std::string& help);

}  // namespace prophet
