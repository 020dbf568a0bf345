"""archwheel's stable-ABI example, built by torch.utils.cpp_extension (setuptools).

``TORCH_TARGET_VERSION`` is the oldest torch the wheel serves (2.12): the stable headers then
use only the C shims that release has. ``TORCH_STABLE_ONLY`` makes every header outside the
stable ABI an error. ``py_limited_api``: the library does not link libtorch_python (it is
loaded with torch.ops.load_library, no Python C API). The arch list comes from
TORCH_CUDA_ARCH_LIST, which cpp_extension reads.
"""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

TARGET = "0x020C000000000000"  # torch 2.12: ((2 << 56) | (12 << 48))
DEFINES = [f"-DTORCH_TARGET_VERSION={TARGET}", "-DTORCH_STABLE_ONLY"]

setup(
    ext_modules=[
        CUDAExtension(
            name="archwheel_stable_ops._C",
            sources=["csrc/ops.cpp", "csrc/ops_cuda.cu"],
            py_limited_api=True,
            # USE_CUDA: the CUDA shims' declarations (aoti_torch_get_current_cuda_stream)
            extra_compile_args={"cxx": ["-O2", *DEFINES], "nvcc": ["-O2", "-DUSE_CUDA", *DEFINES]},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
