// trace_gzip.h: reads a gzip-compressed file (RFC 1952, one or more members) into memory, for traces kept
// compressed (the real routing trace in ../shared/data/smartmoe-gpt/ is a .csv.gz).
#pragma once

#include <cstdint>
#include <string>

namespace prophet {

// True when the file starts with the gzip magic bytes 1f 8b.
bool is_gzip_file(const std::string& path);

// The decompressed bytes of `path`. Throws an input error (exit 4) naming the file for a corrupt or truncated
// stream, and when the output would exceed max_bytes (a bound against decompression bombs).
std::string gunzip_file(const std::string& path, uint64_t max_bytes);

// Largest decompressed trace load_trace accepts (bytes): 4 GiB, ~30x the real trace's 33 MB of CSV.
constexpr uint64_t kMaxGunzippedTraceBytes = uint64_t(4) << 30;

}  // namespace prophet
