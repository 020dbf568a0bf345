// Inclusive prefix sums through CUB's device-wide scan, templated over the dtype.
#include <cub/device/device_scan.cuh>

#include "common.cuh"

namespace awx {

template <typename T>
int inclusive_sum(std::size_t n, const T* x, T* y) {
    if (n > 0x7fffffffu) {
        return static_cast<int>(cudaErrorInvalidValue);
    }
    DeviceBuffer<T> in;
    DeviceBuffer<T> out;
    AWX_TRY(in.allocate(n));
    AWX_TRY(out.allocate(n));
    AWX_TRY(in.upload(x));
    const int items = static_cast<int>(n);
    std::size_t temp_bytes = 0;
    AWX_TRY(cub::DeviceScan::InclusiveSum(nullptr, temp_bytes, in.get(), out.get(), items));
    DeviceBuffer<unsigned char> temp;
    AWX_TRY(temp.allocate(temp_bytes));
    AWX_TRY(cub::DeviceScan::InclusiveSum(temp.get(), temp_bytes, in.get(), out.get(), items));
    AWX_TRY(finish_launch());
    AWX_TRY(out.download(y));
    return 0;
}

}  // namespace awx

#define AWX_SCAN(name, type)                                                          \
    AWX_EXPORT int awx_cumsum_##name(std::size_t n, const type* x, type* y) {         \
        return awx::inclusive_sum<type>(n, x, y);                                     \
    }

AWX_SCAN(f32, float)
AWX_SCAN(f64, double)
AWX_SCAN(i32, int)
AWX_SCAN(i64, long long)
