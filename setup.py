"""Build of the optional native decode kernel (``connector.decode._decode_kernel``); the rest is in pyproject.toml.

The extension is optional: where no C compiler, Python headers or zlib headers exist, the install goes on
and :mod:`connector.decode.kernels` uses its NumPy path (same results, slower).
"""

from setuptools import Extension, setup

SOURCES = ["connector/decode/_decode_kernel.c", "connector/decode/_decode_locate.c",
           "connector/decode/_encode_records.c"]

setup(ext_modules=[Extension(
    "connector.decode._decode_kernel", SOURCES, depends=["connector/decode/_decode_kernel.h"], libraries=["z"],
    extra_compile_args=["-O3"], optional=True)])
