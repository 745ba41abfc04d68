// escaped_bytes.h: bytes of a file shown in an error message: printable ASCII as is, '"', '\' and every other
// byte as \xNN, so a message about a corrupt or hostile file is one safe line. Used by the binary and CSV readers.
#pragma once

#include <string>
#include <string_view>

namespace prophet {

inline std::string escaped_bytes(std::string_view bytes) {
    static const char* kHex = "0123456789abcdef";
    std::string out;
    for (const char ch : bytes) {
        const unsigned char c = static_cast<unsigned char>(ch);
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            out += static_cast<char>(c);
        } else {
            out += "\\x";
            out += kHex[c >> 4];
            out += kHex[c & 15];
        }
    }
    return out;
}

}  // namespace prophet
