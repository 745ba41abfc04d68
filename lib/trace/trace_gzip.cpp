#include "trace/trace_gzip.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <vector>

#include "core/error.h"

namespace prophet {

bool is_gzip_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    unsigned char magic[2] = {};
    in.read(reinterpret_cast<char*>(magic), 2);
    return in.gcount() == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

uint64_t gunzip_limit_bytes(uint64_t compressed_bytes) {
    const uint64_t by_ratio = compressed_bytes > kMaxGunzippedTraceBytes / kMaxGunzipRatio
                                  ? kMaxGunzippedTraceBytes
                                  : compressed_bytes * kMaxGunzipRatio;
    return std::min(kMaxGunzippedTraceBytes, std::max(kMinGunzipLimitBytes, by_ratio));
}

std::string gunzip_file(const std::string& path, uint64_t max_bytes) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw_input_error(path, "cannot open file", "check its permissions");
    const std::string packed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw_input_error(path, "read error", "check the file and the disk");

    z_stream z{};
    // 16 + MAX_WBITS: gzip wrapper only (not raw deflate or zlib), with its CRC checked by zlib
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw_input_error(path, "zlib failed to initialise", "");
    std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&z, inflateEnd);
    std::string out;
    std::vector<char> chunk(1 << 20);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
    z.avail_in = static_cast<uInt>(packed.size());  // the caller's files are far below 4 GiB compressed
    if (packed.size() != z.avail_in)
        throw_input_error(path, "compressed file larger than 4 GiB", "decompress it first (gunzip -k)");
    while (true) {
        z.next_out = reinterpret_cast<Bytef*>(chunk.data());
        z.avail_out = static_cast<uInt>(chunk.size());
        const int rc = inflate(&z, Z_NO_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
            throw_input_error(path, std::string("corrupt gzip data (zlib: ") + (z.msg ? z.msg : "error") + ")",
                              "download or compress the file again");
        out.append(chunk.data(), chunk.size() - z.avail_out);
        if (out.size() > max_bytes)
            throw Error(kExitResource, "resource error: " + path + ": decompresses to more than " +
                                           std::to_string(max_bytes) + " bytes, the limit for its " +
                                           std::to_string(packed.size()) + " compressed bytes (a trace may have " +
                                           std::to_string(kMaxGunzipRatio) + " per compressed byte, at least " +
                                           std::to_string(kMinGunzipLimitBytes) + " and at most " +
                                           std::to_string(kMaxGunzippedTraceBytes) +
                                           "); fix: decompress it yourself (gunzip -k) and pass the plain file");
        if (rc == Z_STREAM_END) {
            if (z.avail_in == 0) break;
            inflateReset(&z);  // concatenated members (gzip -c a b > ab.gz) decompress to the concatenation
            continue;
        }
        if (rc == Z_BUF_ERROR && z.avail_in == 0)
            throw_input_error(path, "gzip stream is truncated (no end of stream)", "the file was cut short; get it again");
    }
    return out;
}

}  // namespace prophet
