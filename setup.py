"""Build of the optional native decode kernel (``connector._decode_kernel``); everything else is in pyproject.toml.

The extension is optional: where no C compiler, Python headers or zlib headers exist, the install goes on
and :mod:`connector.decode.kernels` uses its NumPy path (same results, slower).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "connector._decode_kernel", ["connector/_decode_kernel.c", "connector/_decode_locate.c",
                                 "connector/_encode_records.c"],
    depends=["connector/_decode_kernel.h"], libraries=["z"], extra_compile_args=["-O3"], optional=True)])
