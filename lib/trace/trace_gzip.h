// trace_gzip.h: reads a gzip-compressed file (RFC 1952, one or more members) into memory, for traces kept
// compressed (the real routing trace in ../shared/data/smartmoe-gpt/ is a .csv.gz).
#pragma once

#include <cstdint>
#include <string>

#include "trace/trace.h"

namespace prophet {

// True when the file starts with the gzip magic bytes 1f 8b.
bool is_gzip_file(const std::string& path);

// The decompressed bytes of `path`. Throws an input error (exit 3) naming the file for a corrupt or truncated
// stream, and a resource error (exit 4) naming the limit when the output would exceed max_bytes (a bound against
// decompression bombs).
std::string gunzip_file(const std::string& path, uint64_t max_bytes);

// Largest decompressed trace load_trace accepts (bytes): 4 GiB, ~30x the real trace's 33 MB of CSV.
constexpr uint64_t kMaxGunzippedTraceBytes = uint64_t(4) << 30;
// Below that, at most kMaxGunzipRatio bytes per compressed byte (the real trace: 3.8; deflate reaches ~1000 on
// blank lines, the bomb of issue 26), or kMinGunzipLimitBytes for small files.
constexpr uint64_t kMaxGunzipRatio = 64;
constexpr uint64_t kMinGunzipLimitBytes = uint64_t{16} << 20;
// The decompressed-size limit load_trace gives gunzip_file for a file of `compressed_bytes`.
uint64_t gunzip_limit_bytes(uint64_t compressed_bytes);

// read_trace_csv_text (trace.h) for `text` decompressed from a gzip file of `compressed_bytes`: the declared cells
// are bounded by the compressed size (blank lines deflate ~1000:1, so the text's size bounds nothing), exit 4
// naming the limit. Defined in trace_csv.cpp (the reader).
Trace read_trace_csv_gzip_text(const std::string& text, const std::string& origin, uint64_t compressed_bytes);

}  // namespace prophet
