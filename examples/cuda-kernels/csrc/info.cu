// Device and build information: which compiled image a kernel actually ran from.
#include "common.cuh"

namespace awx {

// __CUDA_ARCH__ of the image the driver picked: 900 means an sm_90 cubin or compute_90 PTX.
__global__ void arch_probe_kernel(int* out) {
#ifdef __CUDA_ARCH__
    *out = __CUDA_ARCH__;
#endif
}

}  // namespace awx

AWX_EXPORT const char* awx_error_string(int status) {
    return cudaGetErrorString(static_cast<cudaError_t>(status));
}

AWX_EXPORT int awx_runtime_version(int* version) {
    return static_cast<int>(cudaRuntimeGetVersion(version));
}

AWX_EXPORT int awx_driver_version(int* version) {
    return static_cast<int>(cudaDriverGetVersion(version));
}

AWX_EXPORT int awx_device_count(int* count) {
    return static_cast<int>(cudaGetDeviceCount(count));
}

AWX_EXPORT int awx_device_capability(int device, int* major, int* minor) {
    AWX_TRY(cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, device));
    AWX_TRY(cudaDeviceGetAttribute(minor, cudaDevAttrComputeCapabilityMinor, device));
    return 0;
}

AWX_EXPORT int awx_kernel_arch(int* arch) {
    awx::DeviceBuffer<int> out;
    AWX_TRY(out.allocate(1));
    AWX_TRY(cudaMemset(out.get(), 0, sizeof(int)));
    awx::arch_probe_kernel<<<1, 1>>>(out.get());
    AWX_TRY(awx::finish_launch());
    AWX_TRY(out.download(arch));
    return 0;
}
