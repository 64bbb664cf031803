// HACK: keeps results in a __device__ array between calls. EXPECT: lint global_state
#include <cuda_runtime.h>
#include <stdint.h>

__device__ float cache[1 << 20];

__global__ void relu(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) { cache[i] = fmaxf(x[i], 0.0f); out[i] = cache[i]; }
}

extern "C" int sage_launch(const float* __restrict__ x, float* __restrict__ out, int64_t B, int64_t D, cudaStream_t stream) {
  relu<<<(unsigned)((B * D + 255) / 256), 256, 0, stream>>>(x, out, B * D);
  return (int)cudaGetLastError();
}
