// device.cpp: device.kind (device.h). The CUDA parts exist only in a build with the CUDA backend
// (PROPHET_HAVE_CUDA, set on prophet_train when prophet_cuda is built).
#include "train/device.h"

#include <algorithm>

#include "core/error.h"

#ifdef PROPHET_HAVE_CUDA
#include "comm/comm_nccl.h"
#include "cuda/check.h"
#include "cuda/gpu_step_model.h"
#endif

namespace prophet {

namespace {
[[noreturn]] void no_device(const std::string& found, const std::string& fix) {
    throw Error(kExitResource, "device error: device.kind = cuda, but " + found + "; fix: " + fix +
                                   ", or set device.kind = cpu");
}
}  // namespace

void require_usable_device(const std::string& kind) {
    if (kind != "cuda") return;
#ifdef PROPHET_HAVE_CUDA
    const char* reason = nullptr;
    const int count = cuda::device_count(&reason);
    if (count == 0)
        no_device(std::string("no usable CUDA device was found (cudaGetDeviceCount: ") +
                      (reason != nullptr ? reason : "0 devices") + ")",
                  "run on a machine with an NVIDIA GPU and a driver for CUDA 13 (check nvidia-smi and "
                  "CUDA_VISIBLE_DEVICES)");
#else
    no_device("this prophet was built without the CUDA backend (PROPHET_CUDA=OFF or no CUDA toolkit found)",
              "rebuild with -DPROPHET_CUDA=ON where the CUDA toolkit is installed");
#endif
}

std::unique_ptr<Communicator> make_run_communicator(const std::string& backend, std::unique_ptr<Communicator> world) {
    if (backend == "mpi") return world;
    PROPHET_ASSERT_MSG(backend == "nccl", "comm.backend = " + backend);
#ifdef PROPHET_HAVE_CUDA
    return make_nccl_communicator(std::move(world));
#else
    throw Error(kExitResource, "device error: comm.backend = nccl, but this prophet was built without the CUDA "
                               "backend (and NCCL); fix: rebuild with -DPROPHET_CUDA=ON, or set comm.backend = mpi");
#endif
}

int local_rank_of(const std::vector<int>& hosts, int rank) {
    PROPHET_ASSERT(rank >= 0 && rank < (int)hosts.size());
    int local = 0;
    for (int r = 0; r < rank; r++) local += hosts[r] == hosts[rank] ? 1 : 0;
    return local;
}

std::unique_ptr<StepModel> make_step_model(const std::string& kind, const std::string& precision, Model<float>& host,
                                           int local_rank, int rank) {
    PROPHET_ASSERT_MSG(precision == "fp32" || (precision == "bf16" && kind == "cuda"),
                       "train.precision = " + precision + " with device.kind = " + kind);
    if (kind == "cpu") return std::make_unique<CpuStepModel>(host);
#ifdef PROPHET_HAVE_CUDA
    if (kind == "cuda") {
        if (rank >= 0) cuda::set_error_rank(rank);
        const auto gemm = precision == "bf16" ? cuda::GemmPrecision::kBf16 : cuda::GemmPrecision::kFp32;
        return std::make_unique<cuda::GpuStepModel>(host, local_rank % std::max(1, cuda::device_count()), gemm);
    }
#endif
    (void)local_rank, (void)rank;
    require_usable_device(kind);  // throws the one-line error for cuda without a backend
    throw_config_error("device.kind", kind, "unknown device", "use cpu or cuda");
}

}  // namespace prophet
