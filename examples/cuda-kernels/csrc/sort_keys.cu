// Radix sort of keys through CUB (part of CCCL, shipped with every CUDA toolkit), templated over
// the key type. CUB's sorting kernels are heavy to compile: they make this example's cold build
// compile-dominated, which is what the warm-cache benchmark measures.
#include <cub/device/device_radix_sort.cuh>

#include "common.cuh"

namespace awx {

template <typename Key>
int sort_keys(std::size_t n, Key* keys, int descending) {
    if (n > 0x7fffffffu) {
        return static_cast<int>(cudaErrorInvalidValue);
    }
    DeviceBuffer<Key> in;
    DeviceBuffer<Key> out;
    AWX_TRY(in.allocate(n));
    AWX_TRY(out.allocate(n));
    AWX_TRY(in.upload(keys));
    const int items = static_cast<int>(n);
    std::size_t temp_bytes = 0;
    if (descending) {
        AWX_TRY(cub::DeviceRadixSort::SortKeysDescending(nullptr, temp_bytes, in.get(), out.get(),
                                                        items));
    } else {
        AWX_TRY(cub::DeviceRadixSort::SortKeys(nullptr, temp_bytes, in.get(), out.get(), items));
    }
    DeviceBuffer<unsigned char> temp;
    AWX_TRY(temp.allocate(temp_bytes));
    if (descending) {
        AWX_TRY(cub::DeviceRadixSort::SortKeysDescending(temp.get(), temp_bytes, in.get(),
                                                        out.get(), items));
    } else {
        AWX_TRY(cub::DeviceRadixSort::SortKeys(temp.get(), temp_bytes, in.get(), out.get(),
                                              items));
    }
    AWX_TRY(finish_launch());
    AWX_TRY(out.download(keys));
    return 0;
}

}  // namespace awx

#define AWX_SORT_KEYS(name, type)                                                    \
    AWX_EXPORT int awx_sort_##name(std::size_t n, type* keys, int descending) {      \
        return awx::sort_keys<type>(n, keys, descending);                            \
    }

AWX_SORT_KEYS(f32, float)
AWX_SORT_KEYS(f64, double)
AWX_SORT_KEYS(i32, int)
AWX_SORT_KEYS(i64, long long)
