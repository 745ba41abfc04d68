// test_checkpoint.cpp: safetensors format, bit-exact checkpoint round trip, `latest`, atomicity after a crash, and
// every rejection on load (truncated, corrupted, not safetensors, another config, missing tensors).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "model/checkpoint.h"

namespace prophet {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Shapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

Error catch_error(const std::function<void()>& body) {
    try {
        body();
    } catch (const Error& e) {
        return e;
    }
    ADD_FAILURE() << "expected a prophet::Error";
    return Error(0, "");
}

void expect_error(const std::function<void()>& body, int exit_code, const std::vector<std::string>& fragments) {
    const Error e = catch_error(body);
    EXPECT_EQ(e.exit_code(), exit_code) << e.what();
    for (const std::string& fragment : fragments)
        EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
            << "missing \"" << fragment << "\" in: " << e.what();
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// a safetensors file from a header text and data bytes, as any writer could produce it
std::string raw_safetensors(const std::string& header, const std::string& data) {
    std::string bytes(8, '\0');
    for (int b = 0; b < 8; ++b) bytes[static_cast<size_t>(b)] = static_cast<char>((header.size() >> (8 * b)) & 0xff);
    return bytes + header + data;
}

std::string float_bytes(const std::vector<float>& values) {
    return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

struct Model {
    Shapes shapes;
    std::map<std::string, std::vector<float>> params;     // name -> [prod(shape)]
    std::map<std::string, std::vector<float>> optimizer;  // "<name>.m", "<name>.v" -> [prod(shape)]

    std::vector<TensorView> param_views() const {
        std::vector<TensorView> views;
        for (const auto& [name, shape] : shapes) views.push_back({name, shape, params.at(name).data()});
        return views;
    }
    std::vector<TensorView> optimizer_views() const {
        std::vector<TensorView> views;
        for (const auto& [name, shape] : shapes)
            for (const char* suffix : {".m", ".v"})
                views.push_back({name + suffix, shape, optimizer.at(name + suffix).data()});
        return views;
    }
};

Model make_model(uint64_t seed) {
    Model model;
    model.shapes = {{"wte", {16, 4}},
                    {"wpe", {8, 4}},
                    {"h.0.ln1.w", {4}},
                    {"h.0.attn.qkv.w", {4, 12}},
                    {"h.0.moe.gate.w", {4, 2}},
                    {"h.0.moe.experts.0.w1", {4, 8}},
                    {"h.0.moe.experts.1.w1", {4, 8}},
                    {"empty", {0, 3}},
                    {"scalar", {}}};
    Rng rng(seed);
    auto fill = [&](const std::vector<int64_t>& shape) {
        int64_t count = 1;
        for (int64_t extent : shape) count *= extent;
        std::vector<float> values(static_cast<size_t>(count));
        for (float& value : values) value = static_cast<float>(rng.normal());
        return values;
    };
    for (const auto& [name, shape] : model.shapes) {
        model.params[name] = fill(shape);
        model.optimizer[name + ".m"] = fill(shape);
        model.optimizer[name + ".v"] = fill(shape);
    }
    std::vector<float>& wte = model.params["wte"];  // values whose bits must survive exactly
    const uint32_t nan_bits = 0x7fc12345u;
    std::memcpy(&wte[0], &nan_bits, sizeof(float));
    wte[1] = -0.0f;
    wte[2] = INFINITY;
    wte[3] = -INFINITY;
    wte[4] = 1e-40f;  // denormal
    wte[5] = FLT_MAX;
    return model;
}

std::map<std::string, RngState> make_rngs() {
    Rng data(11), dropout(12);
    for (int k = 0; k < 5; ++k) data.next_u64();
    return {{"data", rng_state(data)}, {"dropout", rng_state(dropout)}, {"zero", RngState{0, 1, ~0ull, 42}}};
}

CheckpointMeta make_meta(const std::string& hash = "c0ffee") {
    CheckpointMeta meta;
    meta.config_hash = hash;
    meta.prophet_version = "0.1.0";
    meta.optimizer_step = 7;
    meta.data_position = {{"source", "generated"}, {"next_step", "8"}};
    meta.extra = {{"placement", "[0,1]"}};
    return meta;
}

void expect_bits_equal(const std::vector<float>& expected, const Tensor& actual, const std::string& name) {
    ASSERT_EQ(actual.data.size(), expected.size()) << name;
    if (expected.empty()) return;
    EXPECT_EQ(std::memcmp(actual.data.data(), expected.data(), expected.size() * sizeof(float)), 0) << name;
}

// every file and directory under `root` with size and modification time
std::map<std::string, std::pair<uintmax_t, int64_t>> snapshot(const std::string& root) {
    std::map<std::string, std::pair<uintmax_t, int64_t>> files;
    for (const fs::directory_entry& entry : fs::recursive_directory_iterator(root)) {
        const uintmax_t size = entry.is_regular_file() ? entry.file_size() : 0;
        files[entry.path().string()] = {size, entry.last_write_time().time_since_epoch().count()};
    }
    return files;
}

class CheckpointTest : public testing::Test {
  protected:
    void SetUp() override {
        static int counter = 0;
        root_ = (fs::path(testing::TempDir()) /
                 ("prophet_ckpt_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
                    .string();
        fs::remove_all(root_);
        fs::create_directories(root_);
        dir_ = root_ + "/ckpt";
    }
    void TearDown() override { fs::remove_all(root_); }

    std::string save(int64_t step, const Model& model, const std::string& hash = "c0ffee") {
        return save_checkpoint(dir_, step, model.param_views(), model.optimizer_views(), make_rngs(), make_meta(hash));
    }
    std::string model_file(int64_t step) const { return dir_ + "/" + checkpoint_dir_name(step) + "/model.safetensors"; }

    std::string root_;
    std::string dir_;
};

TEST_F(CheckpointTest, RoundTripIsBitExact) {
    const Model model = make_model(1);
    const std::string step_dir = save(7, model);
    EXPECT_EQ(step_dir, dir_ + "/step-00000007");
    const Checkpoint loaded = load_checkpoint(dir_);
    EXPECT_EQ(loaded.dir, step_dir);
    EXPECT_EQ(loaded.step, 7);
    ASSERT_EQ(loaded.tensors.size(), model.shapes.size());
    for (const auto& [name, shape] : model.shapes) {
        ASSERT_TRUE(loaded.tensors.count(name)) << name;
        EXPECT_EQ(loaded.tensors.at(name).shape, shape) << name;
        expect_bits_equal(model.params.at(name), loaded.tensors.at(name), name);
    }
    ASSERT_EQ(loaded.optimizer.size(), model.optimizer.size());
    for (const auto& [name, values] : model.optimizer) expect_bits_equal(values, loaded.optimizer.at(name), name);
    EXPECT_EQ(loaded.rng_states, make_rngs());
    const CheckpointMeta meta = make_meta();
    EXPECT_EQ(loaded.meta.config_hash, meta.config_hash);
    EXPECT_EQ(loaded.meta.prophet_version, meta.prophet_version);
    EXPECT_EQ(loaded.meta.optimizer_step, meta.optimizer_step);
    EXPECT_EQ(loaded.meta.data_position, meta.data_position);
    EXPECT_EQ(loaded.meta.extra, meta.extra);
    for (const fs::directory_entry& entry : fs::directory_iterator(dir_))
        EXPECT_EQ(entry.path().filename().string().rfind(".tmp", 0), std::string::npos) << entry.path();
}

TEST_F(CheckpointTest, RestoredRngContinuesTheSameSequence) {
    Rng rng(99);
    for (int k = 0; k < 17; ++k) rng.next_u64();
    const Model model = make_model(2);
    save_checkpoint(dir_, 1, model.param_views(), model.optimizer_views(), {{"init", rng_state(rng)}}, make_meta());
    Rng restored = rng_from_state(load_checkpoint(dir_).rng_states.at("init"));
    for (int k = 0; k < 10; ++k) EXPECT_EQ(restored.next_u64(), rng.next_u64());
    const json state = json::parse(read_file(dir_ + "/step-00000001/state.json"));
    const std::string hex = state["rng"]["init"].get<std::string>();
    EXPECT_EQ(hex.size(), 64u);
    EXPECT_EQ(hex, rng_state_hex(rng_state(rng_from_state(load_checkpoint(dir_).rng_states.at("init")))));
    EXPECT_EQ(rng_state_hex({1, 2, 0xabcdefull, ~0ull}),
              "000000000000000100000000000000020000000000abcdef"
              "ffffffffffffffff");
}

TEST_F(CheckpointTest, FilesFollowTheSafetensorsLayout) {
    const Model model = make_model(3);
    save(5, model);
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
        const std::string bytes = read_file(dir_ + "/step-00000005/" + file);
        ASSERT_GE(bytes.size(), 8u);
        uint64_t header_len = 0;
        for (int b = 7; b >= 0; --b) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[b]);
        EXPECT_EQ(header_len % 8, 0u) << "header padded to 8-byte alignment";
        ASSERT_LE(8 + header_len, bytes.size());
        const std::string header = bytes.substr(8, header_len);
        EXPECT_EQ(header.front(), '{');
        EXPECT_EQ(header.find_last_not_of(' ') + 1, header.rfind('}') + 1) << "padding is spaces after the JSON";
        const json parsed = json::parse(header);
        ASSERT_TRUE(parsed.contains("__metadata__"));
        EXPECT_EQ(parsed["__metadata__"]["config_hash"], "c0ffee");
        uint64_t data_bytes = 0;
        for (const auto& [name, entry] : parsed.items()) {
            if (name == "__metadata__") continue;
            EXPECT_EQ(entry["dtype"], "F32");
            const uint64_t begin = entry["data_offsets"][0], end = entry["data_offsets"][1];
            uint64_t count = 1;
            for (const json& extent : entry["shape"]) count *= extent.get<uint64_t>();
            EXPECT_EQ(end - begin, count * 4) << name;
            data_bytes += end - begin;
        }
        EXPECT_EQ(bytes.size(), 8 + header_len + data_bytes);
    }
    const std::string bytes = read_file(model_file(5));  // raw little-endian data of one tensor
    uint64_t header_len = 0;
    for (int b = 7; b >= 0; --b) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[b]);
    const json parsed = json::parse(bytes.substr(8, header_len));
    const uint64_t begin = parsed["wpe"]["data_offsets"][0];
    EXPECT_EQ(bytes.substr(8 + header_len + begin, 32 * 4), float_bytes(model.params.at("wpe")));
    EXPECT_EQ(parsed["__metadata__"]["step"], "5");
    const json optimizer_header = read_safetensors_header(dir_ + "/step-00000005/optimizer.safetensors").metadata;
    EXPECT_EQ(optimizer_header["step"], "7");  // the optimizer's step count
}

TEST_F(CheckpointTest, ReadsSafetensorsFromOtherWriters) {
    // unpadded header, data not in name order, metadata, an F32 scalar: what Python's safetensors may write
    const std::string header =
        R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
        R"("a":{"dtype":"F32","shape":[],"data_offsets":[8,12]}})";
    const std::string path = root_ + "/other.safetensors";
    write_file(path, raw_safetensors(header, float_bytes({1.5f, -2.0f, 3.25f})));
    SafetensorsHeader parsed;
    const TensorMap tensors = read_safetensors(path, &parsed);
    EXPECT_EQ(parsed.metadata.at("format"), "pt");
    ASSERT_EQ(parsed.tensors.size(), 2u);
    EXPECT_EQ(parsed.tensors[0].name, "b");  // in data order
    EXPECT_EQ(tensors.at("b").data, (std::vector<float>{1.5f, -2.0f}));
    EXPECT_EQ(tensors.at("a").shape, std::vector<int64_t>{});
    EXPECT_EQ(tensors.at("a").data, std::vector<float>{3.25f});
}

TEST_F(CheckpointTest, LatestPointsToTheNewestSave) {
    const Model first = make_model(4), second = make_model(5);
    save(1, first);
    EXPECT_EQ(read_file(dir_ + "/latest"), "step-00000001\n");
    save(2, second);
    EXPECT_EQ(read_file(dir_ + "/latest"), "step-00000002\n");
    EXPECT_EQ(load_checkpoint(dir_).step, 2);
    expect_bits_equal(second.params.at("wte"), load_checkpoint(dir_).tensors.at("wte"), "wte");
    const Checkpoint older = load_checkpoint(dir_ + "/step-00000001");
    EXPECT_EQ(older.step, 1);
    expect_bits_equal(first.params.at("wte"), older.tensors.at("wte"), "wte");
    EXPECT_FALSE(fs::exists(dir_ + "/.latest.tmp"));
}

TEST_F(CheckpointTest, SavingTheSameStepAgainReplacesIt) {
    save(3, make_model(6));
    const Model replacement = make_model(7);
    save(3, replacement);
    expect_bits_equal(replacement.params.at("h.0.attn.qkv.w"), load_checkpoint(dir_).tensors.at("h.0.attn.qkv.w"),
                      "h.0.attn.qkv.w");
    size_t entries = 0;
    for ([[maybe_unused]] const fs::directory_entry& entry : fs::directory_iterator(dir_)) ++entries;
    EXPECT_EQ(entries, 2u);  // step-00000003 and latest
}

TEST_F(CheckpointTest, CrashBeforeRenameLeavesThePreviousCheckpoint) {
    const Model first = make_model(8), second = make_model(9);
    save(1, first);
    // a crash after writing step 2's temporary directory: a complete copy, and one cut short
    const std::string other = root_ + "/other";
    save_checkpoint(other, 2, second.param_views(), second.optimizer_views(), make_rngs(), make_meta());
    fs::rename(other + "/step-00000002", dir_ + "/.tmp-step-00000002");
    fs::resize_file(dir_ + "/.tmp-step-00000002/model.safetensors", 100);
    const Checkpoint loaded = load_checkpoint(dir_);
    EXPECT_EQ(loaded.step, 1);
    expect_bits_equal(first.params.at("wte"), loaded.tensors.at("wte"), "wte");
    // a crash after the rename, before `latest` moved: still the previous checkpoint
    fs::create_directories(other);
    save_checkpoint(other, 3, second.param_views(), second.optimizer_views(), make_rngs(), make_meta());
    fs::rename(other + "/step-00000003", dir_ + "/step-00000003");
    EXPECT_EQ(load_checkpoint(dir_).step, 1);
    // the next save clears the stale temporary directory
    save(2, second);
    EXPECT_FALSE(fs::exists(dir_ + "/.tmp-step-00000002"));
    EXPECT_EQ(load_checkpoint(dir_).step, 2);
    expect_bits_equal(second.params.at("wte"), load_checkpoint(dir_).tensors.at("wte"), "wte");
}

TEST_F(CheckpointTest, WithoutLatestTheHighestCompleteStepIsUsed) {
    save(4, make_model(10));
    save(12, make_model(11));
    fs::remove(dir_ + "/latest");
    fs::create_directories(dir_ + "/.tmp-step-00000020");
    fs::create_directories(dir_ + "/step-00000030");  // incomplete: no state.json
    EXPECT_EQ(load_checkpoint(dir_).step, 12);
}

// issue 26 item 3: `latest` was written through the fixed name .latest.tmp opened with create+truncate, so a
// symlink planted there made a save overwrite its target
TEST_F(CheckpointTest, SymlinkAtTheOldLatestTemporaryIsLeftAlone) {
    fs::create_directories(dir_);
    const std::string victim = root_ + "/victim";
    { std::ofstream(victim) << "victim's bytes\n"; }
    fs::create_symlink(victim, dir_ + "/.latest.tmp");
    save(1, make_model(14));
    EXPECT_EQ(read_file(victim), "victim's bytes\n");
    EXPECT_TRUE(fs::is_symlink(dir_ + "/.latest.tmp"));
    EXPECT_EQ(read_file(dir_ + "/latest"), "step-00000001\n");
}

TEST_F(CheckpointTest, LoadingWritesNothing) {
    save(1, make_model(12));
    save(2, make_model(13));
    const auto before = snapshot(root_);
    load_checkpoint(dir_);
    load_checkpoint(dir_ + "/step-00000001");
    inspect_checkpoint(dir_);
    EXPECT_EQ(snapshot(root_), before);
}

TEST_F(CheckpointTest, TruncatedFilesAreExit3Truncated) {
    const Model model = make_model(14);
    save(1, model);
    const std::string path = model_file(1);
    const std::string original = read_file(path);
    for (const uintmax_t size :
         {uintmax_t{original.size() - 4}, uintmax_t{original.size() / 2}, uintmax_t{30}, uintmax_t{4}, uintmax_t{0}}) {
        write_file(path, original);
        fs::resize_file(path, size);
        expect_error([&] { load_checkpoint(dir_); }, kExitConfig, {"truncated", path});
        expect_error([&] { read_safetensors(path); }, kExitConfig, {"truncated", path});
    }
    // data size not matching the shape
    const std::string header = R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})";
    write_file(path, raw_safetensors(header, float_bytes({1.0f, 2.0f})));
    expect_error([&] { read_safetensors(path); }, kExitConfig, {"truncated", "[3]"});
}

TEST_F(CheckpointTest, CorruptedOrForeignFilesAreExit3) {
    save(1, make_model(15));
    const std::string path = model_file(1);
    std::string bytes = read_file(path);
    bytes[9] = 'X';  // first character inside the JSON header
    write_file(path, bytes);
    expect_error([&] { load_checkpoint(dir_); }, kExitConfig, {"corrupted header", path});

    write_file(path, "this is a text file, not a tensor file at all\n");
    expect_error([&] { load_checkpoint(dir_); }, kExitConfig, {"not a safetensors file", path});
    write_file(path, raw_safetensors("[1, 2, 3]      ", ""));
    expect_error([&] { read_safetensors(path); }, kExitConfig, {"not a safetensors file"});
    write_file(path, raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", "12345678"));
    expect_error([&] { read_safetensors(path); }, kExitConfig, {"corrupted", "\"a\""});
    write_file(path, raw_safetensors(R"({"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,4]}})", "1234"));
    expect_error([&] { read_safetensors(path); }, kExitConfig, {"dtype"});

    const std::string state = dir_ + "/step-00000001/state.json";
    write_file(state, "{\"format\": \"prophet-checkpoint\", ");
    expect_error([&] { load_checkpoint(dir_); }, kExitConfig, {"state.json", "corrupted"});
    json newer = {{"format", "prophet-checkpoint"}, {"format_version", 99}};
    write_file(state, newer.dump());
    expect_error([&] { load_checkpoint(dir_); }, kExitConfig, {"newer prophet"});
}

TEST_F(CheckpointTest, FilesFromDifferentSavesAreRejected) {
    save(1, make_model(16));
    save(2, make_model(17));
    fs::copy_file(model_file(1), model_file(2), fs::copy_options::overwrite_existing);
    expect_error([&] { load_checkpoint(dir_); }, kExitConfig, {"inconsistent checkpoint", "step"});
}

TEST_F(CheckpointTest, AnotherConfigHashIsExit3AnotherConfig) {
    const Model model = make_model(18);
    save(1, model, "aaaa1111");
    CheckpointExpect expect;
    expect.config_hash = "bbbb2222";
    expect_error([&] { load_checkpoint(dir_, expect); }, kExitConfig,
                 {"checkpoint from another config (hash aaaa1111, expected bbbb2222)", "fix:"});
    expect.tensors = model.shapes;
    expect.tensors[3].second = {8, 24};
    expect_error([&] { load_checkpoint(dir_, expect); }, kExitConfig,
                 {"another config", "h.0.attn.qkv.w is [4, 12] in the checkpoint, [8, 24] expected"});
    expect.config_hash = "aaaa1111";
    expect.tensors = model.shapes;
    EXPECT_EQ(load_checkpoint(dir_, expect).step, 1);
}

TEST_F(CheckpointTest, MissingOrMismatchedTensorsAreExit3NamingThem) {
    Model model = make_model(19);
    save(1, model);
    CheckpointExpect expect;
    expect.config_hash = "c0ffee";
    expect.tensors = model.shapes;
    expect.tensors.push_back({"h.1.ln1.w", {4}});
    expect_error([&] { load_checkpoint(dir_, expect); }, kExitConfig, {"h.1.ln1.w", "missing"});
    expect.tensors = model.shapes;
    expect.tensors[2].second = {5};
    expect_error([&] { load_checkpoint(dir_, expect); }, kExitConfig, {"h.0.ln1.w", "[4]", "[5]"});
    expect.tensors = Shapes(model.shapes.begin() + 1, model.shapes.end());
    expect_error([&] { load_checkpoint(dir_, expect); }, kExitConfig, {"wte", "not a parameter"});

    std::vector<TensorView> optimizer = model.optimizer_views();
    optimizer.erase(
        std::remove_if(optimizer.begin(), optimizer.end(), [](const TensorView& view) { return view.name == "wpe.v"; }),
        optimizer.end());
    save_checkpoint(dir_, 2, model.param_views(), optimizer, make_rngs(), make_meta());
    expect.tensors = model.shapes;
    expect_error([&] { load_checkpoint(dir_, expect); }, kExitConfig, {"wpe.v", "missing", "optimizer"});
    expect.optimizer = false;
    EXPECT_EQ(load_checkpoint(dir_, expect).step, 2);
}

TEST_F(CheckpointTest, BadPathsAreExit3) {
    expect_error([&] { load_checkpoint(root_ + "/nowhere"); }, kExitConfig, {"nowhere", "no such checkpoint"});
    expect_error([&] { load_checkpoint(root_); }, kExitConfig, {"not a checkpoint"});
    save(1, make_model(20));
    write_file(dir_ + "/latest", "step-00000009\n");
    expect_error([&] { load_checkpoint(dir_); }, kExitConfig, {"latest", "step-00000009"});
    write_file(dir_ + "/latest", "../../etc\n");
    expect_error([&] { load_checkpoint(dir_); }, kExitConfig, {"latest", "does not name a step directory"});
}

TEST_F(CheckpointTest, InspectListsTensorsWithoutReadingData) {
    save(6, make_model(21));
    const CheckpointInfo info = inspect_checkpoint(dir_);
    EXPECT_EQ(info.step, 6);
    EXPECT_EQ(info.model.tensors.size(), 9u);
    EXPECT_EQ(info.optimizer.tensors.size(), 18u);
    const std::string text = format_checkpoint_info(info);
    EXPECT_NE(text.find("h.0.attn.qkv.w"), std::string::npos) << text;
    EXPECT_NE(text.find("F32 [4, 12]"), std::string::npos) << text;
    EXPECT_NE(text.find("h.0.moe.experts.1.w1.v"), std::string::npos) << text;
    EXPECT_NE(text.find("step 6, optimizer step 7"), std::string::npos) << text;
}

// Issue 26 item 17: train.keep_checkpoints. Rows: steps saved (in this order), keep, the step directories left.
// `latest` names the last step saved; a step saved again after newer ones (a resume from an older checkpoint)
// stays because `latest` names it, and a symbolic link or a .tmp- directory is never touched.
TEST_F(CheckpointTest, PruneKeepsTheNewestStepsBesidesLatest) {
    struct Case {
        std::vector<int64_t> saved;
        int64_t keep;
        std::vector<std::string> left;
    };
    const Case cases[] = {
        {{1, 2, 3, 4, 5}, 3, {"step-00000003", "step-00000004", "step-00000005"}},
        {{1, 2, 3}, 0, {"step-00000001", "step-00000002", "step-00000003"}},
        {{1, 2, 3}, 1, {"step-00000003"}},
        {{4, 5, 6, 2}, 2, {"step-00000002", "step-00000005", "step-00000006"}},
    };
    const Model model = make_model(3);
    for (const Case& c : cases) {
        fs::remove_all(dir_);
        for (int64_t step : c.saved) {
            save(step, model);
            prune_checkpoints(dir_, c.keep);
        }
        std::vector<std::string> left;
        for (const fs::directory_entry& entry : fs::directory_iterator(dir_))
            if (entry.is_directory()) left.push_back(entry.path().filename().string());
        std::sort(left.begin(), left.end());
        EXPECT_EQ(left, c.left) << "keep " << c.keep;
        EXPECT_EQ(load_checkpoint(dir_).step, c.saved.back());
    }
}

TEST_F(CheckpointTest, PruneLeavesWhatIsNotAStepDirectoryOfThisCheckpoint) {
    const Model model = make_model(3);
    // what is not a step directory of this checkpoint stays, however old
    fs::remove_all(dir_);
    save(5, model);
    fs::create_directories(root_ + "/elsewhere/step-00000001");
    fs::create_directory_symlink(root_ + "/elsewhere/step-00000001", dir_ + "/step-00000001");
    fs::create_directories(dir_ + "/.tmp-step-00000002");
    save(6, model);
    EXPECT_TRUE(prune_checkpoints(dir_, 1).size() == 1u);  // step 5 only
    EXPECT_TRUE(fs::exists(root_ + "/elsewhere/step-00000001"));
    EXPECT_TRUE(fs::is_symlink(dir_ + "/step-00000001"));
    EXPECT_TRUE(fs::exists(dir_ + "/.tmp-step-00000002"));
}

TEST_F(CheckpointTest, ASecondWriterOfOneDirectoryIsRefusedWithExitFour) {
    const FileLock first = lock_checkpoint_dir(dir_);
    try {
        lock_checkpoint_dir(dir_);
        ADD_FAILURE() << "a second lock on " << dir_;
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitResource) << e.what();
        EXPECT_NE(std::string(e.what()).find("is in use"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("train.checkpoint_dir"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace prophet
