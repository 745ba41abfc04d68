// fuzz_config.cpp: libFuzzer target for the config parser (Config::merge_toml_string) and `--set`
// (Config::apply_set). Every malformed input must end in a prophet::Error; anything else is a finding.
//
// Input layout: the whole input is merged as a TOML document into a Config on a schema with every key type;
// independently, each line of the input (at most 16) is applied as a `--set` assignment to a fresh Config.
// The resolved config is then read back (canonical_toml, hash, flat) so the stored values are exercised too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/config.h"
#include "core/error.h"
#include "trace/trace.h"

namespace {

const prophet::Schema& fuzz_schema() {
    static const prophet::Schema schema = [] {
        prophet::Schema s;
        s.add_int("model.V", 256, 1, 1 << 20, "vocabulary size");
        s.add_int("model.L", 2, 1, 64, "layers");
        s.add_int("train.seed", 1, std::nullopt, std::nullopt, "seed");
        s.add_float("train.lr", 3e-4, 0.0, 1.0, "learning rate", /*min_exclusive=*/true);
        s.add_float("train.beta", 0.9, std::nullopt, std::nullopt, "any float");
        s.add_bool("train.resume", false, "resume");
        s.add_string("balance.policy", "none", {"none", "eplb", "prophet", "moetuner"}, "policy");
        s.add_string("run.name", "x", {}, "free string");
        prophet::KeySpec il;
        il.key = "sweep.devices";
        il.type = prophet::ValueType::kIntList;
        il.default_value = std::vector<int64_t>{1, 2};
        il.min = 1;
        il.max = 4096;
        il.help = "int list";
        s.add(il);
        prophet::KeySpec fl;
        fl.key = "sweep.skew";
        fl.type = prophet::ValueType::kFloatList;
        fl.default_value = std::vector<double>{0.5};
        fl.min = 0.0;
        fl.help = "float list";
        s.add(fl);
        prophet::KeySpec sl;
        sl.key = "sweep.policies";
        sl.type = prophet::ValueType::kStringList;
        sl.default_value = std::vector<std::string>{"none"};
        sl.choices = {"none", "eplb", "prophet"};
        sl.help = "string list";
        s.add(sl);
        s.add_required("cluster.num_devices", prophet::ValueType::kInt, 1, 1 << 16, "devices");
        return s;
    }();
    return schema;
}

void exercise(const prophet::Config& config) {
    (void)config.canonical_toml();
    (void)config.hash();
    (void)config.flat();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);

    // 1. the whole input as a TOML file, on the fuzz schema and on the trace generator schema
    for (const prophet::Schema* schema : {&fuzz_schema(), &prophet::trace_generator_schema()}) {
        try {
            prophet::Config config(*schema, "fuzz");
            config.merge_toml_string(text, "fuzz.toml");
            config.check_required();
            exercise(config);
        } catch (const prophet::Error&) {
        }
    }

    // 2. each line as a --set assignment
    std::string_view rest(text);
    for (int n = 0; n < 16 && !rest.empty(); ++n) {
        const size_t nl = rest.find('\n');
        const std::string line(rest.substr(0, nl));
        rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
        try {
            prophet::Config config(fuzz_schema(), "fuzz");
            config.apply_set(line);
            exercise(config);
        } catch (const prophet::Error&) {
        }
    }
    return 0;
}
