// fuzz_checkpoint.cpp: libFuzzer target for the checkpoint reader: the input bytes as a safetensors file read
// by prophet::read_safetensors_header and prophet::read_safetensors. Every malformed input must end in a
// prophet::Error; anything else (another exception, a crash, a sanitizer report, an allocation beyond
// -rss_limit_mb / -malloc_limit_mb) is a finding.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "fuzz_file.h"
#include "model/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static fuzz::InputFile file;
    const std::string& path = file.write(data, size);
    try {
        (void)prophet::read_safetensors_header(path);
    } catch (const prophet::Error&) {
    }
    try {
        prophet::SafetensorsHeader header;
        (void)prophet::read_safetensors(path, &header);
    } catch (const prophet::Error&) {
    }
    return 0;
}
