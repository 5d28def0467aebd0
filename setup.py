"""Builds the native rewrite engine (third_party/taso) and installs xflowrl.

The engine's C++ sources are compiled straight into one Cython extension,
`xflowrl._engine`. Optional cost backends are found, never assumed:

- oneDNN (CPU, measured): headers and libdnnl from the pip wheels
  `onednn-devel-cpu-gomp` / `onednn-cpu-gomp` (requirements.txt), looked up in
  this interpreter's prefix, or in $DNNL_ROOT. Disable with XFLOWRL_NO_ONEDNN=1.
- cuDNN (GPU, measured): needs the CUDA runtime, cuDNN and cuBLAS headers and
  libraries; looked up in $CUDA_HOME, the `nvidia-*` pip wheels and the usual
  system prefixes. Disable with XFLOWRL_NO_CUDNN=1.

Install with `pip install --no-build-isolation -e .` after requirements.txt,
so that the build sees the oneDNN wheel installed beside it.
"""

import glob
import os
import sys
import sysconfig

from setuptools import Extension, find_packages, setup

ROOT = os.path.dirname(os.path.abspath(__file__))
TASO = os.path.join("third_party", "taso")


def _log(msg):
    print(f"[xflowrl setup] {msg}", file=sys.stderr)


def _find_onednn():
    if os.environ.get("XFLOWRL_NO_ONEDNN"):
        return None
    prefixes = [os.environ.get("DNNL_ROOT"), sys.prefix, sys.base_prefix]
    for prefix in filter(None, prefixes):
        header = os.path.join(prefix, "include", "dnnl.hpp")
        libs = glob.glob(os.path.join(prefix, "lib", "libdnnl.so*"))
        if os.path.exists(header) and libs:
            return prefix
    return None


def _find_cuda():
    """Returns (include_dirs, library_dirs) with cudnn.h, cublas and cudart."""
    if os.environ.get("XFLOWRL_NO_CUDNN"):
        return None
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
             "/usr/local/cuda", "/usr"]
    site = sysconfig.get_paths()["purelib"]
    nvidia = os.path.join(site, "nvidia")
    incs, libs = [], []
    for root in filter(None, roots):
        incs += [os.path.join(root, "include")]
        libs += [os.path.join(root, "lib64"), os.path.join(root, "lib"),
                 os.path.join(root, "lib", "x86_64-linux-gnu")]
    for pkg in ("cuda_runtime", "cudnn", "cublas"):
        incs.append(os.path.join(nvidia, pkg, "include"))
        libs.append(os.path.join(nvidia, pkg, "lib"))

    def has(name, dirs):
        return next((d for d in dirs if glob.glob(os.path.join(d, name))), None)

    found_inc = [has(h, incs) for h in ("cuda_runtime_api.h", "cudnn.h", "cublas_v2.h")]
    found_lib = [has(l, libs) for l in ("libcudart.so*", "libcudnn.so*", "libcublas.so*")]
    if None in found_inc or None in found_lib:
        return None
    return sorted(set(found_inc)), sorted(set(found_lib))


def _extension():
    sources = [os.path.join(TASO, "python", "_engine.pyx")]
    sources += sorted(glob.glob(os.path.join(TASO, "src", "*.cc")))
    sources += sorted(glob.glob(os.path.join(TASO, "src", "cost", "*.cc")))
    include_dirs = [os.path.join(TASO, "include")]
    library_dirs, libraries, macros = [], [], []
    compile_args = ["-std=c++17", "-O2", "-Wall", "-Wno-unused-function"]
    link_args = []

    dnnl = _find_onednn()
    if dnnl:
        _log(f"oneDNN found in {dnnl}: building the onednn cost backend")
        include_dirs.append(os.path.join(dnnl, "include"))
        library_dirs.append(os.path.join(dnnl, "lib"))
        libraries.append("dnnl")
        macros.append(("TASO_WITH_ONEDNN", "1"))
        compile_args.append("-fopenmp")
        link_args += ["-fopenmp", f"-Wl,-rpath,{os.path.join(dnnl, 'lib')}"]
    else:
        _log("oneDNN not found: the onednn cost backend is disabled")

    cuda = _find_cuda()
    if cuda:
        incs, libs = cuda
        _log(f"CUDA/cuDNN found ({incs}): building the cudnn cost backend")
        include_dirs += incs
        library_dirs += libs
        libraries += ["cudart", "cudnn", "cublas"]
        macros.append(("TASO_WITH_CUDNN", "1"))
        link_args += [f"-Wl,-rpath,{d}" for d in libs]
    else:
        _log("CUDA/cuDNN not found: the cudnn cost backend is disabled")

    return Extension(
        "xflowrl._engine",
        sources=sources,
        include_dirs=include_dirs,
        library_dirs=library_dirs,
        libraries=libraries,
        define_macros=macros,
        extra_compile_args=compile_args,
        extra_link_args=link_args,
        language="c++",
    )


def _cythonize(ext):
    from Cython.Build import cythonize  # pylint: disable=import-outside-toplevel
    return cythonize(
        [ext],
        include_path=[os.path.join(TASO, "python")],
        compiler_directives={"language_level": 3},
    )


setup(
    name="xflowrl",
    version="0.1.0",
    description=("Model-free and model-based reinforcement learning for "
                 "computation-graph optimisation over a TASO-style rewrite engine"),
    packages=find_packages(include=["xflowrl", "xflowrl.*"]),
    ext_modules=_cythonize(_extension()),
    python_requires=">=3.10",
    zip_safe=False,
)
