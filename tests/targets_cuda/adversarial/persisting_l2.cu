// HACK: pins the inputs in persisting L2 so the harness's flush does not evict them. EXPECT: lint l2_persistence
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void relu(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = fmaxf(x[i], 0.0f);
}

extern "C" int sage_launch(const float* __restrict__ x, float* __restrict__ out, int64_t B, int64_t D, cudaStream_t stream) {
  cudaStreamAttrValue attr = {};
  attr.accessPolicyWindow.base_ptr = (void*)x;
  attr.accessPolicyWindow.num_bytes = B * D * sizeof(float);
  attr.accessPolicyWindow.hitRatio = 1.0f;
  attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &attr);
  relu<<<(unsigned)((B * D + 255) / 256), 256, 0, stream>>>(x, out, B * D);
  return (int)cudaGetLastError();
}
