// data_internal.h: what the data.* keys and the data sources share (data_config.cpp, data_file.cpp, data.cpp): the
// vocabulary limit and the token file formats; not part of lib/model's interface (data.h is).
#pragma once

#include <cstdint>
#include <string>

#include "core/enum_table.h"

namespace prophet::data_detail {

constexpr int64_t kMaxVocab = 2147483647;  // token ids are int32

// data.file_format -> bytes per token
constexpr EnumName<int64_t> kTokenWidths[] = {{1, "bytes"}, {2, "uint16"}, {4, "int32"}};

inline int64_t token_width(const std::string& file_format) { return find_enum(kTokenWidths, file_format).value_or(1); }

inline std::string quote(const std::string& s) { return "\"" + s + "\""; }

}  // namespace prophet::data_detail
