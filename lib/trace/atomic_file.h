// atomic_file.h: the end of an atomic trace write (internal to lib/trace): close `out` (writing `tmp`), then
// rename `tmp` over `path`. A failed write removes `tmp` and throws exit 4 (disk full or I/O error); a failed
// rename throws exit 3 naming the path. Either way `path` is left as it was.
#pragma once

#include <fstream>
#include <string>

namespace prophet {

void finish_atomic_write(std::ofstream& out, const std::string& tmp, const std::string& path);

}  // namespace prophet
