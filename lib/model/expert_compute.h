// expert_compute.h: where the expert-parallel executor (moe/ep_executor.h) runs the FFN of the rows a rank
// received, and where that rank's expert parameters live. The executor's layout, dispatch, combine, Trans and Agg
// are one code path (host buffers, any Communicator); only this part differs by device:
//   - moe/experts.h's CpuExpertCompute: the experts on the CPU, parameters in the host model arena (the default);
//   - cuda/gpu_expert_compute.h's GpuExpertCompute: the rows copied to the GPU, the experts' GEMMs there (grouped),
//     the outputs copied back ("host-staged": ranks sharing one GPU, or NCCL ranks with a GPU each).
//
// Rows are expert-sorted (moe/layout.h): expert e's rows of the layer are [offsets[e], offsets[e+1]) of x.
// Trans and Agg move the HOST copies of the experts (ExpertStorage); a compute whose parameters live elsewhere
// copies them around those transfers: *_to_host before the executor sends, *_from_host after it received.
#pragma once

#include <cstdint>
#include <vector>

namespace prophet {

class ExpertCompute {
  public:
    virtual ~ExpertCompute() = default;
    virtual const char* name() const = 0;
    // x [M,C] (host), offsets [E+1] (M = offsets[E]); y [M,C] (host, overwrite). Keeps what backward needs.
    virtual void forward(int layer, const std::vector<int64_t>& offsets, const float* x, float* y) = 0;
    // x [M,C]: the rows of the last forward(layer) again (host; a device compute may use its own copy);
    // dy [M,C] (host); dx [M,C] (host, overwrite); the layer's expert parameter gradients ACCUMULATE (+=).
    virtual void backward(int layer, const std::vector<int64_t>& offsets, const float* x, const float* dy,
                          float* dx) = 0;
    // experts [E]: 1 = copy that expert of `layer` (parameters: w1 then w2, 2*C*F floats; gradients alike).
    virtual void params_to_host(int layer, const std::vector<uint8_t>& experts) = 0;
    virtual void params_from_host(int layer, const std::vector<uint8_t>& experts) = 0;
    virtual void grads_to_host(int layer, const std::vector<uint8_t>& experts) = 0;
    virtual void grads_from_host(int layer, const std::vector<uint8_t>& experts) = 0;
};

}  // namespace prophet
