// device_util.cuh: the few device helpers the kernels share: warp/block sums, grid sizing for grid-stride loops.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

namespace prophet::cuda {

constexpr int kThreads = 256;  // block size of the element-wise and row kernels (8 warps)
constexpr int kWarp = 32;

// Blocks for a grid-stride loop over n items with kThreads per block; capped (the loops stride), at least 1.
inline unsigned grid_for(size_t n, int threads = kThreads) {
    const size_t blocks = (n + threads - 1) / threads;
    return (unsigned)std::clamp<size_t>(blocks, 1, 1u << 20);
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
    for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int offset = kWarp / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, <= 1024); every thread gets the result. shared: >= 32
// elements. Ends with a barrier so `shared` may be reused right after.
template <typename T>
__device__ T block_sum(T v, T* shared) {
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
    v = warp_sum(v);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    T total = lane < warps ? shared[lane] : T(0);
    total = warp_sum(total);  // every warp reduces the per-warp sums in the same order
    __syncthreads();
    return total;
}

__device__ inline float block_max(float v, float* shared) {
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
    v = warp_max(v);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    float m = lane < warps ? shared[lane] : -INFINITY;
    m = warp_max(m);
    __syncthreads();
    return m;
}

}  // namespace prophet::cuda
