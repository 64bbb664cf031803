// RMSNorm: one block per row, sum of squares in float.
#include <cuda_runtime.h>
#include <stdint.h>
#include <math.h>

// Block-wide reductions over 256 threads (8 warps): warp shuffles, then one warp over the partials.
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) {
    float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = (w > v || w != w) ? w : v;
  }
  return v;
}
__device__ float block_sum(float v, float* scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? scratch[threadIdx.x] : 0.0f;
  if (warp == 0) v = warp_sum(v);
  if (threadIdx.x == 0) scratch[0] = v;
  __syncthreads();
  v = scratch[0];
  __syncthreads();
  return v;
}
__device__ float block_max(float v, float* scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? scratch[threadIdx.x] : -INFINITY;
  if (warp == 0) v = warp_max(v);
  if (threadIdx.x == 0) scratch[0] = v;
  __syncthreads();
  v = scratch[0];
  __syncthreads();
  return v;
}

__global__ void row_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out, int64_t D, float eps) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * D;
  float* yr = out + row * D;
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) ss += xr[c] * xr[c];
  ss = block_sum(ss, scratch);
  float inv = rsqrtf(ss / (float)D + eps);
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) yr[c] = xr[c] * inv * w[c];
}

extern "C" int sage_launch(const float* __restrict__ x, const float* __restrict__ weight, float* __restrict__ out, int64_t B, int64_t D, float eps, cudaStream_t stream) {
  if (B == 0) return 0;
  row_kernel<<<(unsigned)B, 256, 0, stream>>>(x, weight, out, D, eps);
  return (int)cudaGetLastError();
}
