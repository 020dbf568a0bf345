// Radix sort of (key, value) pairs through CUB: an argsort when the values are 0..n-1.
#include <cub/device/device_radix_sort.cuh>

#include "common.cuh"

namespace awx {

template <typename Key, typename Value>
int sort_pairs(std::size_t n, Key* keys, Value* values, int descending) {
    if (n > 0x7fffffffu) {
        return static_cast<int>(cudaErrorInvalidValue);
    }
    DeviceBuffer<Key> keys_in;
    DeviceBuffer<Key> keys_out;
    DeviceBuffer<Value> values_in;
    DeviceBuffer<Value> values_out;
    AWX_TRY(keys_in.allocate(n));
    AWX_TRY(keys_out.allocate(n));
    AWX_TRY(values_in.allocate(n));
    AWX_TRY(values_out.allocate(n));
    AWX_TRY(keys_in.upload(keys));
    AWX_TRY(values_in.upload(values));
    const int items = static_cast<int>(n);
    std::size_t temp_bytes = 0;
    void* temp_ptr = nullptr;
    DeviceBuffer<unsigned char> temp;
    for (int pass = 0; pass < 2; ++pass) {  // pass 0 sizes the temporary storage
        if (descending) {
            AWX_TRY(cub::DeviceRadixSort::SortPairsDescending(
                temp_ptr, temp_bytes, keys_in.get(), keys_out.get(), values_in.get(),
                values_out.get(), items));
        } else {
            AWX_TRY(cub::DeviceRadixSort::SortPairs(temp_ptr, temp_bytes, keys_in.get(),
                                                    keys_out.get(), values_in.get(),
                                                    values_out.get(), items));
        }
        if (pass == 0) {
            AWX_TRY(temp.allocate(temp_bytes));
            temp_ptr = temp.get();
        }
    }
    AWX_TRY(finish_launch());
    AWX_TRY(keys_out.download(keys));
    AWX_TRY(values_out.download(values));
    return 0;
}

}  // namespace awx

#define AWX_SORT_PAIRS(name, key, value)                                                      \
    AWX_EXPORT int awx_sort_pairs_##name(std::size_t n, key* keys, value* values,             \
                                         int descending) {                                    \
        return awx::sort_pairs<key, value>(n, keys, values, descending);                     \
    }

AWX_SORT_PAIRS(f32_i32, float, int)
AWX_SORT_PAIRS(i32_i32, int, int)
AWX_SORT_PAIRS(f64_i64, double, long long)
