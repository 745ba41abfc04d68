// device.kind (train/device.h) as a user meets it without a GPU: `--set device.kind=cuda` ends with exit 4 and
// ONE line naming the key, what was found and the fix, before the store, a run row, a checkpoint directory or a
// trace is written. CUDA_VISIBLE_DEVICES is emptied so a machine with a GPU takes the same path (a CUDA build
// then sees zero devices; a build without CUDA refuses for that reason). Several ranks with cuda: exit 4 alike.
// And a CPU command starts without loading cuBLAS (StartingLoadsNoCublas).
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "../temp_dir_test.h"
#include "cli_util.h"
#include "core/error.h"

namespace fs = std::filesystem;

namespace {

// The lines prophet wrote to stderr (mpirun's own banner lines do not start with "prophet:").
std::vector<std::string> prophet_lines(const std::string& err) {
    std::vector<std::string> lines;
    std::istringstream in(err);
    for (std::string line; std::getline(in, line);)
        if (line.rfind("prophet:", 0) == 0) lines.push_back(line);
    return lines;
}

// No GPU visible, and a bound on the time (a regression that trains instead must not hang the suite).
const std::string kNoGpu = "timeout -s KILL 120 env CUDA_VISIBLE_DEVICES=";

class DeviceCli : public prophet::testing::TempDirTest {
  protected:
    std::string run_args(const std::string& command, const std::string& extra) {
        return command + " --config experiments/train/skewed-4rank.toml --json --set train.steps=2 --set store.path=" +
               db_ + " --set device.kind=cuda " + extra;
    }
    void expect_nothing_written() {
        EXPECT_FALSE(fs::exists(db_)) << "a refused run created the store";
        EXPECT_FALSE(fs::exists(dir_ / "ckpt")) << "a refused run created its checkpoint directory";
        EXPECT_FALSE(fs::exists(dir_ / "trace.ptrace")) << "a refused profile wrote a trace";
    }
};

}  // namespace

TEST_F(DeviceCli, CudaWithoutADeviceExitsFourCleanly) {
    for (const char* command : {"train", "profile"}) {
        const std::string extra = std::string(command) == "train"
                                      ? "--save --set train.checkpoint_dir=" + (dir_ / "ckpt").string()
                                      : "-o " + (dir_ / "trace.ptrace").string();
        const auto r = prophet::testing::run_prophet(kNoGpu, run_args(command, extra), dir_);
        EXPECT_EQ(r.exit_code, prophet::kExitResource) << command << ": " << r.err;
        const std::vector<std::string> lines = prophet_lines(r.err);
        ASSERT_EQ(lines.size(), 1u) << command << ": " << r.err;
        EXPECT_EQ(r.err, lines[0] + "\n") << command << ": nothing but the one line";
        for (const char* needle : {"device.kind = cuda", "fix:", "device.kind = cpu"})
            EXPECT_NE(lines[0].find(needle), std::string::npos) << command << ": " << needle << " in " << lines[0];
        EXPECT_TRUE(r.out.empty()) << command << ": " << r.out;
        expect_nothing_written();
    }
}

// Several ranks with cuda are expert parallelism on GPUs (host-staged, docs/gpu.md): without a device every rank
// refuses with the exit-4 line (printed once, by rank 0) before anything is written.
TEST_F(DeviceCli, CudaOnSeveralRanksWithoutADeviceExitsFourBeforeAnythingIsWritten) {
    if (!prophet::testing::have_mpirun()) GTEST_SKIP() << "mpirun not installed";
    const auto r = prophet::testing::run_prophet(
        "timeout -s KILL 120 env CUDA_VISIBLE_DEVICES= mpirun --allow-run-as-root --oversubscribe -np 2",
        run_args("train", "--save --set train.checkpoint_dir=" + (dir_ / "ckpt").string()), dir_);
    EXPECT_EQ(r.exit_code, prophet::kExitResource) << r.err;
    const std::vector<std::string> lines = prophet_lines(r.err);
    ASSERT_EQ(lines.size(), 1u) << "only rank 0 reports: " << r.err;
    EXPECT_NE(lines[0].find("device.kind = cuda, but"), std::string::npos) << lines[0];
    expect_nothing_written();
}

TEST_F(DeviceCli, UnknownDeviceKindNamesTheAllowedValues) {
    const auto r = prophet::testing::run_prophet(
        "timeout -s KILL 60", "train --set store.path=" + db_ + " --set device.kind=gpu", dir_);
    EXPECT_EQ(r.exit_code, prophet::kExitConfig) << r.err;
    EXPECT_NE(r.err.find("device.kind = gpu: must be one of cpu|cuda"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(db_));
}

TEST_F(DeviceCli, WhatTheGpuModelLacksIsRefusedBeforeAnythingIsWritten) {
    for (const char* set : {"model.capacity_factor=1.25", "model.aux_loss_coef=0.01", "schedule.mode=blockwise",
                            "routing.source=trace"}) {
        const auto r = prophet::testing::run_prophet(kNoGpu, run_args("train", std::string("--set ") + set), dir_);
        EXPECT_EQ(r.exit_code, prophet::kExitConfig) << set << ": " << r.err;
        const std::string key = std::string(set).substr(0, std::string(set).find('='));
        EXPECT_NE(r.err.find("config error: " + key), std::string::npos) << set << ": " << r.err;
        expect_nothing_written();
    }
}

// train.precision = bf16 (bf16 GEMMs over fp32 master weights, docs/gpu.md) exists on GPUs only: on the CPU model
// it is a config error naming the key, the value and the fix, before anything is written; an unknown precision
// names the allowed values. With device.kind = cuda and no device, bf16 takes the usual exit-4 line (the key is
// accepted there).
TEST_F(DeviceCli, Bf16IsAGpuOptionAndRefusedOnTheCpu) {
    const auto cpu = prophet::testing::run_prophet(
        "timeout -s KILL 60", "train --set store.path=" + db_ + " --set train.precision=bf16", dir_);
    EXPECT_EQ(cpu.exit_code, prophet::kExitConfig) << cpu.err;
    for (const char* needle : {"config error: train.precision = bf16", "device.kind = cpu", "set device.kind = cuda"})
        EXPECT_NE(cpu.err.find(needle), std::string::npos) << needle << " in " << cpu.err;
    EXPECT_FALSE(fs::exists(db_));

    const auto bad = prophet::testing::run_prophet(
        "timeout -s KILL 60", "train --set store.path=" + db_ + " --set train.precision=fp16", dir_);
    EXPECT_EQ(bad.exit_code, prophet::kExitConfig) << bad.err;
    EXPECT_NE(bad.err.find("train.precision = fp16: must be one of fp32|bf16"), std::string::npos) << bad.err;

    const auto gpu = prophet::testing::run_prophet(kNoGpu, run_args("train", "--set train.precision=bf16"), dir_);
    EXPECT_EQ(gpu.exit_code, prophet::kExitResource) << gpu.err;
    EXPECT_NE(gpu.err.find("device.kind = cuda"), std::string::npos) << gpu.err;
    expect_nothing_written();
}

// comm.backend = nccl (one rank per GPU, docs/gpu.md) moves GPU buffers: with the CPU model it is a config error
// naming the key and the fix, before anything is written; the emulated link cannot pace NCCL; with cuda and no
// device the usual exit-4 line comes first.
TEST_F(DeviceCli, NcclBackendNeedsCudaRanks) {
    const auto cpu = prophet::testing::run_prophet(
        "timeout -s KILL 60", "train --set store.path=" + db_ + " --set comm.backend=nccl", dir_);
    EXPECT_EQ(cpu.exit_code, prophet::kExitConfig) << cpu.err;
    for (const char* needle : {"config error: comm.backend = nccl", "set device.kind = cuda"})
        EXPECT_NE(cpu.err.find(needle), std::string::npos) << needle << " in " << cpu.err;
    EXPECT_FALSE(fs::exists(db_));

    const auto paced = prophet::testing::run_prophet(
        kNoGpu, run_args("train", "--set comm.backend=nccl --set comm.link_gbps=10"), dir_);
    EXPECT_EQ(paced.exit_code, prophet::kExitConfig) << paced.err;
    EXPECT_NE(paced.err.find("config error: comm.link_gbps"), std::string::npos) << paced.err;

    const auto gpu = prophet::testing::run_prophet(kNoGpu, run_args("train", "--set comm.backend=nccl"), dir_);
    EXPECT_EQ(gpu.exit_code, prophet::kExitResource) << gpu.err;
    expect_nothing_written();
}

// The block-wise schedule with cuda: several ranks over MPI take it (the config is accepted: without a device the
// exit-4 line follows); one cuda rank has nothing to overlap and NCCL cannot be called from the schedule's second
// thread: both exit 3 naming schedule.mode, before anything is written.
TEST_F(DeviceCli, BlockwiseWithCudaNeedsSeveralMpiRanks) {
    if (!prophet::testing::have_mpirun()) GTEST_SKIP() << "mpirun not installed";
    const std::string two = "timeout -s KILL 120 env CUDA_VISIBLE_DEVICES= mpirun --allow-run-as-root --oversubscribe -np 2";
    const auto mpi = prophet::testing::run_prophet(two, run_args("train", "--set schedule.mode=blockwise"), dir_);
    EXPECT_EQ(mpi.exit_code, prophet::kExitResource) << mpi.err;
    const auto nccl = prophet::testing::run_prophet(
        two, run_args("train", "--set schedule.mode=blockwise --set comm.backend=nccl"), dir_);
    EXPECT_EQ(nccl.exit_code, prophet::kExitConfig) << nccl.err;
    EXPECT_NE(nccl.err.find("config error: schedule.mode = blockwise"), std::string::npos) << nccl.err;
    EXPECT_NE(nccl.err.find("comm.backend = nccl"), std::string::npos) << nccl.err;
    const auto one = prophet::testing::run_prophet(kNoGpu, run_args("train", "--set schedule.mode=blockwise"), dir_);
    EXPECT_EQ(one.exit_code, prophet::kExitConfig) << one.err;
    EXPECT_NE(one.err.find("one cuda rank"), std::string::npos) << one.err;
    expect_nothing_written();
}

// A CPU command does not load cuBLAS (lib/cuda/cublas_api.h: opened on first use; linked, its initialisers took
// ~0.35 s at the start of every prophet command). LD_DEBUG=libs: glibc's loader lists each library it opens.
TEST_F(DeviceCli, StartingLoadsNoCublas) {
    const auto r = prophet::testing::run_prophet("env LD_DEBUG=libs", "--version", dir_);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("libc.so.6"), std::string::npos) << "the loader listed nothing:\n" << r.err;
    EXPECT_EQ(r.err.find("libcublas"), std::string::npos) << r.err;
}
