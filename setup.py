"""Builds the native rewrite engine (third_party/taso) and installs xflowrl.

The engine's C++ sources are compiled straight into one Cython extension,
`xflowrl._engine`; a second, small extension, `xflowrl.planning._inner`, holds
the engine planner's inner loops in C. Optional cost backends are found, never assumed:

- oneDNN (CPU, measured): headers and libdnnl from the pip wheels
  `onednn-devel-cpu-gomp` / `onednn-cpu-gomp` (requirements.txt), looked up in
  this interpreter's prefix, or in $DNNL_ROOT. Disable with XFLOWRL_NO_ONEDNN=1.
- cuDNN (GPU, measured): needs the CUDA runtime, cuDNN and cuBLAS headers and
  libraries; looked up in $CUDA_HOME, the `nvidia-*` pip wheels and the usual
  system prefixes. Disable with XFLOWRL_NO_CUDNN=1.

pyproject.toml declares what the build needs (setuptools, wheel, Cython),
so `pip install .` works in a fresh venv; pip then builds in an isolated
environment that it fills from the package index. scripts/bootstrap.sh
installs requirements.txt first and builds with `pip install
--no-build-isolation -e .`, against the pinned stack, with nothing fetched
for the build. Either way the oneDNN wheels are looked up in this
interpreter's prefix, so install requirements.txt first to get that backend.
The rule files and the oneDNN reference table are package data, so an
installed copy (not only a source checkout) finds them.

Warnings: the engine's own sources (third_party/taso/src) compile with
`-Wall -Wextra -Werror` (ENGINE_WARNINGS); Cython's generated _engine.cpp with
`-Wall` only, since its code is not ours to fix. XFLOWRL_NO_WERROR=1 keeps
the warnings but drops -Werror (e.g. a newer compiler with new warnings).
scripts/engine_tests.sh builds the engine's C++ unit tests with the same
warnings.
"""

import glob
import os
import sys
import sysconfig

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
TASO = os.path.join("third_party", "taso")
ENGINE_SOURCES = os.path.join(TASO, "src")
# On top of the extension's flags, for the engine's own sources only.
ENGINE_WARNINGS = ["-Wextra", "-Wunused-function"]
if not os.environ.get("XFLOWRL_NO_WERROR"):
    ENGINE_WARNINGS.append("-Werror")


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


def _nvidia_wheel_roots():
    """`nvidia/` folders of the NVIDIA pip wheels visible to this interpreter.

    sys.path covers the venv's site-packages and any PYTHONPATH entry (e.g. a
    `pip install --target DIR` of the wheels, as scripts/check_cudnn_build.sh
    does).
    """
    entries = [sysconfig.get_paths()["purelib"]] + sys.path
    roots = []
    for entry in entries:
        root = os.path.join(entry or ".", "nvidia")
        if os.path.isdir(root) and root not in roots:
            roots.append(root)
    return roots


def _find_cuda():
    """Returns (include_dirs, library_dirs, libraries) for cudart, cuDNN, cuBLAS.

    Each library is looked up as a header and a shared library under the same
    root, so that headers of one cuDNN are never paired with another's
    library. Wheels ship only versioned libraries (libcudnn.so.9): those are
    linked by file name (-l:libcudnn.so.9).
    """
    if os.environ.get("XFLOWRL_NO_CUDNN"):
        return None
    def prefixes(roots):
        return [(os.path.join(r, "include"),
                 [os.path.join(r, "lib64"), os.path.join(r, "lib"),
                  os.path.join(r, "lib", "x86_64-linux-gnu")])
                for r in roots if r]

    # Order: an explicit $CUDA_HOME/$CUDA_PATH, then the pip wheels (a
    # consistent set), then system prefixes (which may hold another CUDA
    # major version's runtime than the wheels' cuDNN was built for).
    explicit = prefixes([os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")])
    system = prefixes(["/usr/local/cuda", "/usr"])
    wheels = {pkg: [(os.path.join(r, pkg, "include"), [os.path.join(r, pkg, "lib")])
                    for r in _nvidia_wheel_roots()]
              for pkg in ("cuda_runtime", "cudnn", "cublas")}
    wanted = (("cuda_runtime", "cuda_runtime_api.h", "cudart"),
              ("cudnn", "cudnn.h", "cudnn"),
              ("cublas", "cublas_v2.h", "cublas"))
    incs, libdirs, libraries = [], [], []
    for pkg, header, lib in wanted:
        found = None
        for inc, dirs in explicit + wheels[pkg] + system:
            if not os.path.exists(os.path.join(inc, header)):
                continue
            for d in dirs:
                names = [os.path.basename(f)
                         for f in glob.glob(os.path.join(d, f"lib{lib}.so*"))]
                if f"lib{lib}.so" in names:
                    found = (inc, d, lib)
                elif names:
                    found = (inc, d, ":" + min(names, key=len))
                if found:
                    break
            if found:
                break
        if not found:
            return None
        inc, d, name = found
        incs.append(inc)
        libdirs.append(d)
        libraries.append(name)
    # The runtime headers include crt/host_defines.h and (through
    # cuda_fp16.h) nv/target; the runtime wheel ships neither: they are in
    # the nvcc and CCCL wheels (nvidia-cuda-nvcc-cu12, nvidia-cuda-cccl-cu12).
    for header, pkg in (("crt/host_defines.h", "cuda_nvcc"), ("nv/target", "cuda_cccl")):
        if any(os.path.exists(os.path.join(d, header)) for d in incs):
            continue
        dirs = [inc for inc, _ in explicit]
        dirs += [os.path.join(r, pkg, "include") for r in _nvidia_wheel_roots()]
        dirs += [inc for inc, _ in system]
        dirs = [d for d in dirs if os.path.exists(os.path.join(d, header))]
        if not dirs:
            _log(f"no {header} beside the CUDA runtime headers in {incs[0]}")
            return None
        incs.append(dirs[0])
    # dict.fromkeys drops duplicates and keeps the order.
    return list(dict.fromkeys(incs)), list(dict.fromkeys(libdirs)), libraries


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
        # -isystem: a vendor's headers are not ours to warn about (-Werror).
        compile_args += ["-isystem", os.path.join(dnnl, "include")]
        library_dirs.append(os.path.join(dnnl, "lib"))
        libraries.append("dnnl")
        macros.append(("TASO_WITH_ONEDNN", "1"))
        compile_args.append("-fopenmp")
        link_args += ["-fopenmp", f"-Wl,-rpath,{os.path.join(dnnl, 'lib')}"]
    else:
        _log("oneDNN not found: the onednn cost backend is disabled")

    cuda = _find_cuda()
    if cuda:
        incs, libs, names = cuda
        _log(f"CUDA/cuDNN found ({incs}; {names}): building the cudnn cost backend")
        for inc in incs:  # vendor headers: -isystem, as oneDNN's
            compile_args += ["-isystem", inc]
        library_dirs += libs
        libraries += names
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


class _BuildExt(build_ext):
    """build_ext that adds ENGINE_WARNINGS to the engine's own sources.

    An Extension has one set of flags for all its sources; the compiler's
    per-source step (`_compile`, distutils' hook for exactly this) is wrapped
    for the duration of the build so that the flags differ by file.
    """

    def build_extension(self, ext):
        compile_one = self.compiler._compile

        def _compile(obj, src, src_ext, cc_args, extra_postargs, pp_opts):
            rel = os.path.relpath(os.path.abspath(src), ROOT)
            if rel.startswith(ENGINE_SOURCES + os.sep):
                extra_postargs = list(extra_postargs) + ENGINE_WARNINGS
            return compile_one(obj, src, src_ext, cc_args, extra_postargs, pp_opts)

        self.compiler._compile = _compile
        try:
            super().build_extension(ext)
        finally:
            del self.compiler._compile


def _planner_extension():
    """The engine planner's inner loops in C (xflowrl/planning/_inner.pyx):
    no engine code, no C++."""
    return Extension("xflowrl.planning._inner",
                     sources=[os.path.join("xflowrl", "planning", "_inner.pyx")],
                     extra_compile_args=["-O2", "-Wall"])


def _cythonize(*exts):
    from Cython.Build import cythonize  # pylint: disable=import-outside-toplevel
    return cythonize(
        list(exts),
        include_path=[os.path.join(TASO, "python")],
        compiler_directives={"language_level": 3},
    )


setup(
    name="xflowrl",
    version="0.1.0",
    description=("Model-free and model-based reinforcement learning for "
                 "computation-graph optimisation over a TASO-style rewrite engine"),
    packages=find_packages(include=["xflowrl", "xflowrl.*"]),
    # The onednn reference cost table (docs/engine.md), the rule files
    # (docs/rules.md) and the shipped policy.
    package_data={"xflowrl.engine": ["data/*.tsv", "data/*.json",
                                     # The learned GPU cost model's timings and graphs.
                                     "data/gpu_times/*.jsonl",
                                     "data/gpu_times/graphs/*.json.gz"],
                  "xflowrl.rules.files": ["*.json"],
                  # The settings where looking ahead pays (xflowrl.search.settings).
                  "xflowrl.search": ["data/*.json"],
                  # The shipped generalist policy (docs/agents.md).
                  "xflowrl.policy": ["shipped/generalist/*"]},
    ext_modules=_cythonize(_extension(), _planner_extension()),
    cmdclass={"build_ext": _BuildExt},
    # The `xflowrl` command (optimize, inspect, measure, calibrate; docs/cli.md).
    entry_points={"console_scripts": ["xflowrl = xflowrl.cli:console_main"]},
    # `pip install xflowrl[gpu]`: PyTorch, with which `xflowrl optimize
    # --device=cuda` checks and times models on the GPU
    # (xflowrl.measure.torch_runtime; docs/cli.md). Install the CUDA build
    # that matches your driver; xflowrl imports without it.
    extras_require={"gpu": ["torch>=2.1"]},
    python_requires=">=3.10",
    zip_safe=False,
)
