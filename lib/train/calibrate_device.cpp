// calibrate_device.cpp: calibrate_on_device (calibrate_device.h). The CUDA parts exist only in a build with the
// CUDA backend (PROPHET_HAVE_CUDA); train_settings_from and require_usable_device keep device.kind = cuda out of
// the others.
#include "train/calibrate_device.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/optim.h"
#include "model/data.h"
#include "train/device.h"
#include "train/traffic.h"

#ifdef PROPHET_HAVE_CUDA
#include "cuda/gpu_calibrate.h"
#include "cuda/gpu_step_model.h"
#endif

namespace prophet {

void calibrate_on_device(Communicator& comm, const Model<float>& trained, const TrainSettings& settings,
                         Calibration* cal) {
    if (settings.device_kind == "cpu") return;
#ifdef PROPHET_HAVE_CUDA
    const ModelConfig& m = settings.model;
    const int D = comm.size(), B_local = m.B / D, M = B_local * m.T;
    const int local_rank = local_rank_of(gather_rank_hosts(comm), comm.rank());  // collective
    Model<float> model(trained.config);
    model.params = trained.params;
    auto data = make_data_source(settings.data, m.T, m.B);
    std::vector<int32_t> inputs(static_cast<size_t>(B_local) * m.T), targets(inputs.size());
    const auto [first, last] = rank_sequences(m.B, comm.rank(), D);
    data->batch(0, first, last, inputs.data(), targets.data());

    // the step model of the run (its device, its precision): compute figures, then the step's tail on it
    std::unique_ptr<StepModel> step = make_step_model(settings.device_kind, settings.precision, model, local_rank, comm.rank());
    auto* gpu = dynamic_cast<cuda::GpuStepModel*>(step.get());
    PROPHET_ASSERT_MSG(gpu != nullptr, "device.kind = " + settings.device_kind + " without a GPU step model");
    const cuda::GpuComputeFigures fig = cuda::measure_gpu_compute(
        gpu->context(), model, inputs.data(), targets.data(), B_local, static_cast<double>(m.B) * m.T, M);
    // the slowest rank decides: the largest times
    double times[3] = {fig.expert_s, fig.fnec_s, fig.bnec_s};
    comm.all_reduce_max(times, 3);
    cal->expert_flops_per_s = 4.0 * M * m.C * m.hidden_size() / times[0];
    cal->fnec_s = times[1];
    cal->bnec_s = times[2];

    // the tail as Trainer::step runs it on a device rank (home experts under static EP, dense tensors once)
    std::vector<char> skip, include;
    static_ep_step_masks(model, comm.rank(), D, &skip, &include);
    cal->step_tail_s = time_collective(comm, [&] {
        step->reduce_dense_grads([&](float* data, size_t n) { comm.all_reduce_sum(data, n); });
        double norm_sq = step->grad_norm_sq(&include);
        comm.all_reduce_sum(&norm_sq, 1);
        step->adamw_step(settings.lr.max_lr, settings.adamw, grad_clip_scale(std::sqrt(norm_sq), settings.grad_clip),
                         &skip);  // synchronizes the device
        double loss = 1.0;
        comm.all_reduce_sum(&loss, 1);
        step->zero_grad();
    });
#else
    (void)comm, (void)trained, (void)cal;
    require_usable_device(settings.device_kind);  // throws: this build has no CUDA backend
#endif
}

}  // namespace prophet
