// HACK: loads a library at run time to call its kernels. EXPECT: lint os_access, include
#include <cuda_runtime.h>
#include <stdint.h>
#include <dlfcn.h>

extern "C" int sage_launch(const float* __restrict__ x, float* __restrict__ out, int64_t B, int64_t D, cudaStream_t stream) {
  void* h = dlopen("libcublas.so", RTLD_NOW);
  return h ? 0 : 1;
}
