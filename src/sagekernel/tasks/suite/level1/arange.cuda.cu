// arange(N) * step + start, computed in double and rounded once to float (as the reference does).
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void arange_kernel(float* __restrict__ out, int64_t N, double start, double step) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < N) out[i] = (float)((double)i * step + start);
}

extern "C" int sage_launch(float* __restrict__ out, int64_t N, float start, float step, cudaStream_t stream) {
  if (N == 0) return 0;
  arange_kernel<<<(unsigned)((N + 255) / 256), 256, 0, stream>>>(out, N, (double)start, (double)step);
  return (int)cudaGetLastError();
}
