// data_file.cpp: the file token stream (data.source = "file"): read, checked and held as 16- or 32-bit tokens.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "core/error.h"
#include "model/data.h"
#include "model/data_internal.h"

namespace prophet {

using data_detail::quote;
using data_detail::token_width;

namespace {

constexpr size_t kReadChunk = size_t{1} << 20;  // bytes per read() of a token file

// Opens the token file `path` (data.path) for reading and sets `size` to its bytes; `need` and `fix` finish the
// messages. The caller closes the descriptor.
int open_token_file(const std::string& path, const std::string& need, const std::string& fix, int64_t& size) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) {
        const int err = errno;
        throw_input_error(
            path, std::string(err == ENOENT ? "file not found" : std::strerror(err)) + " (data.path); " + need, fix);
    }
    if (S_ISDIR(info.st_mode)) throw_input_error(path, "is a directory, not a file (data.path); " + need, fix);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw_input_error(path, std::string("cannot open: ") + std::strerror(errno) + "; " + need, fix);
    size = static_cast<int64_t>(info.st_size);
    return fd;
}

// Reads `size` bytes of `width`-byte little-endian tokens from fd in kReadChunk pieces, checks each is in
// [0, vocab_size) and hands it on as store(position, token).
template <typename Store>
void read_token_stream(int fd, const std::string& path, int64_t size, int64_t width, int64_t vocab_size, Store store) {
    std::vector<unsigned char> chunk(kReadChunk);  // [kReadChunk] bytes, a whole number of tokens
    int64_t token_idx = 0;
    int64_t bytes_left = size;
    while (bytes_left > 0) {
        const size_t want = static_cast<size_t>(std::min<int64_t>(bytes_left, static_cast<int64_t>(kReadChunk)));
        size_t got = 0;
        while (got < want) {
            const ssize_t r = ::read(fd, chunk.data() + got, want - got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0)
                throw_input_error(path, r == 0 ? "file shrank while being read" : std::strerror(errno),
                                  "make sure nothing else writes data.path during training");
            got += static_cast<size_t>(r);
        }
        for (size_t b = 0; b < want; b += static_cast<size_t>(width), ++token_idx) {
            const unsigned char* p = chunk.data() + b;
            int64_t value = p[0];
            if (width >= 2) value |= static_cast<int64_t>(p[1]) << 8;
            if (width == 4)
                value = static_cast<int32_t>(static_cast<uint32_t>(value) | (static_cast<uint32_t>(p[2]) << 16) |
                                             (static_cast<uint32_t>(p[3]) << 24));
            if (value < 0 || value >= vocab_size)
                throw_input_error(path,
                                  "token " + std::to_string(value) + " at position " + std::to_string(token_idx) +
                                      " is outside [0, data.vocab_size = " + std::to_string(vocab_size) + ")",
                                  "raise data.vocab_size above the largest token id, or check data.file_format");
            store(token_idx, value);
        }
        bytes_left -= static_cast<int64_t>(want);
    }
}

}  // namespace

TokenStreamSource::TokenStreamSource(const std::string& path, const std::string& file_format, int64_t seq_len,
                                     int64_t batch_size, int64_t vocab_size)
    : DataSource(seq_len, batch_size, vocab_size), wide_(vocab_size > 65536), origin_(path) {
    const int64_t width = token_width(file_format);
    const std::string need = "a training stream needs at least T+2 = " + std::to_string(seq_len + 2) +
                             " tokens (sequence length T = " + std::to_string(seq_len) + ")";
    const std::string fix = "set data.path to a file of at least " + std::to_string((seq_len + 2) * width) +
                            " bytes, or use data.source = \"generated\"";
    int64_t size = 0;
    const int fd = open_token_file(path, need, fix, size);
    struct FdCloser {
        int fd;
        ~FdCloser() { ::close(fd); }
    } closer{fd};
    if (size == 0) throw_input_error(path, "file is empty (data.path); " + need, fix);
    if (size % width != 0)
        throw_input_error(path,
                          "size " + std::to_string(size) + " bytes is not a whole number of " + std::to_string(width) +
                              "-byte tokens (data.file_format = " + quote(file_format) + ")",
                          "check data.file_format, or use \"bytes\"");
    num_tokens_ = size / width;
    if (num_tokens_ < seq_len + 2)
        throw_input_error(path, "holds " + std::to_string(num_tokens_) + " tokens; " + need, fix);
    try {
        if (wide_)
            tokens32_.resize(static_cast<size_t>(num_tokens_));
        else
            tokens16_.resize(static_cast<size_t>(num_tokens_));
    } catch (const std::bad_alloc&) {
        throw Error(kExitResource, "resource error: " + path + ": " + std::to_string(num_tokens_) +
                                       " tokens do not fit in memory; fix: use a smaller data.path file");
    }
    read_token_stream(fd, path, size, width, vocab_size, [&](int64_t position, int64_t value) {
        if (wide_)
            tokens32_[static_cast<size_t>(position)] = static_cast<int32_t>(value);
        else
            tokens16_[static_cast<size_t>(position)] = static_cast<uint16_t>(value);
    });
}

TokenStreamSource::TokenStreamSource(std::vector<int32_t> tokens, int64_t seq_len, int64_t batch_size,
                                     int64_t vocab_size)
    : DataSource(seq_len, batch_size, vocab_size), wide_(vocab_size > 65536), origin_("memory") {
    num_tokens_ = static_cast<int64_t>(tokens.size());
    if (num_tokens_ < seq_len + 2)
        throw_input_error("memory",
                          "holds " + std::to_string(num_tokens_) +
                              " tokens; a training stream needs at least T+2 = " + std::to_string(seq_len + 2),
                          "pass a longer token vector");
    for (int64_t i = 0; i < num_tokens_; ++i) {
        if (tokens[static_cast<size_t>(i)] < 0 || tokens[static_cast<size_t>(i)] >= vocab_size)
            throw_input_error("memory",
                              "token " + std::to_string(tokens[static_cast<size_t>(i)]) + " at position " +
                                  std::to_string(i) + " is outside [0, " + std::to_string(vocab_size) + ")",
                              "raise vocab_size above the largest token id");
    }
    if (wide_) {
        tokens32_ = std::move(tokens);
    } else {
        tokens16_.assign(tokens.begin(), tokens.end());
    }
}

int64_t TokenStreamSource::offset(int64_t step, int64_t seq_idx) const {
    PROPHET_ASSERT(step >= 0 && seq_idx >= 0);
    using u128 = unsigned __int128;
    const u128 modulus = static_cast<u128>(num_tokens_ - seq_len() - 1);
    const u128 position = (static_cast<u128>(step) * static_cast<u128>(batch_size()) + static_cast<u128>(seq_idx)) *
                          static_cast<u128>(seq_len());
    return static_cast<int64_t>(position % modulus);
}

std::string TokenStreamSource::describe() const {
    return "file " + origin_ + " (" + std::to_string(num_tokens_) + " tokens, vocab " + std::to_string(vocab_size()) +
           ")";
}

void TokenStreamSource::sequences(int64_t step, int64_t seq_begin, int64_t seq_end, int32_t* tokens,
                                  int32_t* topics) const {
    const int64_t T = seq_len();
    for (int64_t i = seq_begin; i < seq_end; ++i) {
        const int64_t start = offset(step, i);
        int32_t* run = tokens + (i - seq_begin) * (T + 1);
        for (int64_t k = 0; k <= T; ++k) run[k] = token(start + k);
        std::fill(topics + (i - seq_begin) * (T + 1), topics + (i - seq_begin + 1) * (T + 1), -1);
    }
}

}  // namespace prophet
