// import_common.cpp: bounded file reading and JSON count checks shared by the importers.
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "load_series.h"

namespace prophet::import_detail {

void check_cells(const std::string& origin, int64_t steps, int64_t layers, int64_t sources, int64_t experts) {
    int64_t cells = 1;
    for (int64_t factor : {steps, layers, sources, experts}) {
        if (factor < 1 || __builtin_mul_overflow(cells, factor, &cells) || cells > kMaxImportCells)
            throw_input_error(origin,
                              "sizes too large: steps x layers x devices x experts = " + std::to_string(steps) + " x " +
                                  std::to_string(layers) + " x " + std::to_string(sources) + " x " +
                                  std::to_string(experts) + " exceeds 2^28 counts (2 GiB)",
                              "import fewer steps (split the file) or fewer devices");
    }
}

std::string read_bounded_file(const std::string& path) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0)
        throw_input_error(path, "no such file", "check the path (quote it if it has spaces)");
    if (!S_ISREG(info.st_mode)) throw_input_error(path, "not a regular file", "pass the file the engine wrote");
    if (info.st_size > kMaxImportFileBytes)
        throw Error(kExitResource, "resource error: " + path + ": " + std::to_string(info.st_size) +
                                       " bytes exceeds the importer's limit of 2^30 bytes (1 GiB); fix: split the "
                                       "file (fewer steps per file) and import the parts");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw_input_error(path, "cannot open for reading", "check the file's permissions");
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

nlohmann::json parse_json_file(const std::string& path) {
    const std::string text = read_bounded_file(path);
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw_input_error(path, std::string("not valid JSON: ") + e.what(),
                          "pass the JSON file the engine (or the conversion script) wrote, complete");
    }
}

int64_t json_count(const nlohmann::json& value, const std::string& path, const std::string& field) {
    if (value.is_number_unsigned() && value.get<uint64_t>() <= static_cast<uint64_t>(kMaxImportCount))
        return static_cast<int64_t>(value.get<uint64_t>());
    std::string problem;
    if (value.is_number_integer() && value.get<int64_t>() < 0)
        problem = "is negative";
    else if (value.is_number_integer() || value.is_number_unsigned())
        problem = "is larger than 2^40";
    else if (value.is_number_float())
        problem = "is not an integer";
    else
        problem = "is a " + std::string(value.type_name()) + ", not a count";
    std::string shown = value.dump();
    if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
    throw_input_error(path, field + " = " + shown + " " + problem,
                      "counts are tokens routed to an expert: non-negative integers");
}

}  // namespace prophet::import_detail
