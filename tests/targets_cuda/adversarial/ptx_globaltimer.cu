// HACK: reads %globaltimer through inline PTX. EXPECT: lint timer
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void relu(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = fmaxf(x[i], 0.0f) + (float)(t & 0);
}

extern "C" int sage_launch(const float* __restrict__ x, float* __restrict__ out, int64_t B, int64_t D, cudaStream_t stream) {
  relu<<<(unsigned)((B * D + 255) / 256), 256, 0, stream>>>(x, out, B * D);
  return (int)cudaGetLastError();
}
