"""The host's share of a remembered call, in C++: a call's key and its launch's arguments.

At a decoding step the GPU rotates ``q`` and ``k`` in 2 to 3 µs, and a call's time is the
host's: Python reading each tensor's shape, strides, dtype, device and flags to find the
launch it made before (:func:`posenc.fast.triton._plan_key`), then each tensor's address to
make it again. Every one of those reads is a call into torch of a tenth of a microsecond or
so; there are about thirty, and then the launch's arguments are assembled. This module
compiles two small functions against torch's C++ headers that read the tensors directly:

- ``signature(q, k, table, angles, inv_freq, inplace)``: the tensors' part of the key as
  bytes (q's device type in the first, then device, dtype, sizes and strides of each), or
  None for the calls :func:`~posenc.fast.triton._plan_key` does not remember; two calls get
  equal bytes exactly when their Python keys are equal (a property test checks it);
- ``arguments(mask, slots, sources, sizes, offset, rest)``: the launch's arguments,
  ``(*addresses, *sizes, offset, *rest)``, the addresses those of ``sources[i]`` for each
  ``i`` in ``slots``, as integers; or None unless each of those tensors is 16-byte aligned as
  ``mask`` remembers (bit ``j`` for the ``j``-th). Triton's launcher takes an integer as a
  pointer as it is, where for a tensor it asks the tensor for its address and the driver
  whether that address is the GPU's.

The module is built with the system's C++ compiler (``$CXX``, else ``c++``, ``g++`` or
``clang++``) against the torch that runs, into :func:`posenc.device.cache_dir`, under a name
that hashes the source, the compiler, the flags and the torch and Python versions. The build
takes seconds, so a GPU call never waits for it: the first call remembered on a GPU loads the
module if it was built before, and otherwise builds it in a thread, and calls use it once it
is loaded. The cache is kept as :mod:`posenc.fast._compiled` describes (verified before it is
loaded, built once under a lock, a compiler that does not answer given up on and
remembered). Without a compiler (or with ``$CXX`` naming a program that is not on the PATH),
or if the build fails, :func:`status` says why and the same work is done in Python.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import platform
import sys
import sysconfig
import threading
from pathlib import Path

import torch

from posenc.fast import _compiled

__all__ = ["SOURCE", "available", "status"]

SOURCE = r"""
#include <Python.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>
#include <cstring>
#include <vector>

static PyObject *tensor_type = nullptr; /* torch.Tensor: subclasses are not remembered */

static inline bool exact(PyObject *o) { return Py_TYPE(o) == (PyTypeObject *)tensor_type; }

/* A tensor's device, dtype, sizes and strides, in that order. */
static void put(std::vector<int64_t> &out, const at::Tensor &t) {
    out.push_back((int64_t)t.device().type());
    out.push_back(t.device().index());
    out.push_back((int64_t)t.scalar_type());
    out.push_back(t.dim());
    for (int64_t s : t.sizes()) out.push_back(s);
    for (int64_t s : t.strides()) out.push_back(s);
}

/* signature(q, k, table, angles, inv_freq, inplace): see posenc/fast/host.py. */
static PyObject *signature(PyObject *, PyObject *const *args, Py_ssize_t n) {
    if (n != 6) {
        PyErr_SetString(PyExc_TypeError, "signature takes 6 arguments");
        return nullptr;
    }
    PyObject *q = args[0], *k = args[1], *table = args[2], *freqs = args[4];
    bool angles = args[3] == Py_True, inplace = args[5] == Py_True;
    try {
        if (!exact(q) || q == k) Py_RETURN_NONE;
        const at::Tensor &tq = THPVariable_Unpack(q);
        if (tq.dim() != 4 || tq.requires_grad() || tq.is_neg()) Py_RETURN_NONE;
        std::vector<int64_t> out;
        out.reserve(48);
        put(out, tq);
        bool inference = tq.is_inference();
        if (k == Py_None) {
            out.push_back(0);
        } else {
            if (!exact(k)) Py_RETURN_NONE;
            const at::Tensor &tk = THPVariable_Unpack(k);
            if (tk.requires_grad() || tk.is_neg()) Py_RETURN_NONE;
            inference = inference || tk.is_inference();
            out.push_back(1);
            put(out, tk);
        }
        if (inplace && inference && !c10::InferenceMode::is_enabled()) Py_RETURN_NONE;
        if (table == Py_None) {
            out.push_back(0);
        } else {
            if (!exact(table)) Py_RETURN_NONE;
            const at::Tensor &tp = THPVariable_Unpack(table);
            if (tp.is_neg() || (angles && tp.requires_grad())) Py_RETURN_NONE;
            out.push_back(angles ? 2 : 1);
            put(out, tp);
        }
        if (freqs == Py_None) {
            out.push_back(0);
        } else {
            if (!exact(freqs)) Py_RETURN_NONE;
            const at::Tensor &tf = THPVariable_Unpack(freqs);
            if (tf.requires_grad() || tf.is_neg() || tf.device().is_cpu()) Py_RETURN_NONE;
            out.push_back(1);
            put(out, tf);
        }
        /* a first byte Python reads cheaply: q's device type (0 the CPU, 1 CUDA, 127 beyond) */
        Py_ssize_t size = (Py_ssize_t)(out.size() * sizeof(int64_t));
        PyObject *bytes = PyBytes_FromStringAndSize(nullptr, size + 1);
        if (bytes == nullptr) return nullptr;
        char *at = PyBytes_AS_STRING(bytes);
        at[0] = (char)(out[0] < 127 ? out[0] : 127);
        memcpy(at + 1, out.data(), (size_t)size);
        return bytes;
    } catch (const std::exception &) { /* no sizes or strides (sparse, nested): not kept */
        Py_RETURN_NONE;
    }
}

/* arguments(mask, slots, sources, sizes, offset, rest): see posenc/fast/host.py. */
static PyObject *arguments(PyObject *, PyObject *const *args, Py_ssize_t n) {
    if (n != 6 || !PyLong_Check(args[0]) || !PyTuple_Check(args[1]) || !PyTuple_Check(args[2])
        || !PyTuple_Check(args[3]) || !PyTuple_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError,
                        "arguments takes a mask, slots, sources, sizes, an offset and the rest");
        return nullptr;
    }
    unsigned long long mask = PyLong_AsUnsignedLongLong(args[0]);
    if (PyErr_Occurred()) return nullptr;
    PyObject *slots = args[1], *sources = args[2], *sizes = args[3], *rest = args[5];
    Py_ssize_t m = PyTuple_GET_SIZE(slots), have = PyTuple_GET_SIZE(sources);
    if (m > 64) Py_RETURN_NONE;
    uintptr_t at[64];
    unsigned long long seen = 0;
    try {
        for (Py_ssize_t i = 0; i < m; i++) {
            Py_ssize_t slot = PyLong_AsSsize_t(PyTuple_GET_ITEM(slots, i));
            if (slot < 0 || slot >= have) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_IndexError, "a slot past the sources");
                return nullptr;
            }
            PyObject *t = PyTuple_GET_ITEM(sources, slot);
            if (!exact(t)) Py_RETURN_NONE;
            at[i] = (uintptr_t)THPVariable_Unpack(t).data_ptr();
            if (at[i] % 16 == 0) seen |= 1ULL << i;
        }
    } catch (const std::exception &) {
        Py_RETURN_NONE;
    }
    if (seen != mask) Py_RETURN_NONE;
    Py_ssize_t ns = PyTuple_GET_SIZE(sizes), nr = PyTuple_GET_SIZE(rest);
    PyObject *out = PyTuple_New(m + ns + 1 + nr);
    if (out == nullptr) return nullptr;
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong((unsigned long long)at[i]);
        if (v == nullptr) {
            Py_DECREF(out);
            return nullptr;
        }
        PyTuple_SET_ITEM(out, i, v);
    }
    Py_ssize_t j = m;
    for (Py_ssize_t i = 0; i < ns; i++, j++) {
        PyObject *v = PyTuple_GET_ITEM(sizes, i);
        Py_INCREF(v);
        PyTuple_SET_ITEM(out, j, v);
    }
    Py_INCREF(args[4]);
    PyTuple_SET_ITEM(out, j++, args[4]);
    for (Py_ssize_t i = 0; i < nr; i++, j++) {
        PyObject *v = PyTuple_GET_ITEM(rest, i);
        Py_INCREF(v);
        PyTuple_SET_ITEM(out, j, v);
    }
    return out;
}

static PyObject *init(PyObject *, PyObject *type) {
    Py_XDECREF(tensor_type);
    Py_INCREF(type);
    tensor_type = type;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"signature", (PyCFunction)(void (*)(void))signature, METH_FASTCALL, nullptr},
    {"arguments", (PyCFunction)(void (*)(void))arguments, METH_FASTCALL, nullptr},
    {"init", (PyCFunction)init, METH_O, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_posenc_host", nullptr, -1, methods};

PyMODINIT_FUNC PyInit__posenc_host(void) { return PyModule_Create(&module); }
"""

_NAME = "_posenc_host"
_STANDARDS = ("-std=c++20", "-std=c++17")  # recent torch asks for C++20; older takes 17

_lock = threading.Lock()
_state: dict = {}
_module = None
"""The loaded module once :func:`_load` has loaded it (read without a lock by every call)."""


def _compiler() -> str | None:
    return _compiled.compiler("CXX", ("c++", "g++", "clang++"))


def _flags(standard: str) -> list[str]:
    root = Path(torch.__file__).resolve().parent  # torch's headers and libraries, as installed
    includes = (root / "include", root / "include" / "torch" / "csrc" / "api" / "include")
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    lib = root / "lib"
    return [
        "-O2", "-shared", "-fPIC", standard, f"-D_GLIBCXX_USE_CXX11_ABI={abi}", "-w",
        *(f"-I{p}" for p in includes), f"-I{sysconfig.get_paths()['include']}",
        f"-L{lib}", f"-Wl,-rpath,{lib}", "-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python",
    ]  # fmt: skip


def _build_args(compiler: str) -> tuple:
    """What :func:`posenc.fast._compiled.targets` and ``build`` take for this module."""
    identity = "\n".join((torch.__version__, sys.version, platform.machine()))
    variants = [_flags(standard) for standard in _STANDARDS]
    return _NAME, SOURCE, compiler, variants, identity, importlib.machinery.EXTENSION_SUFFIXES[0]


def _open(path: Path):
    """The module at ``path``, imported and given torch.Tensor (ImportError for a file that
    is not this module)."""
    spec = importlib.util.spec_from_file_location(_NAME, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.init(torch.Tensor)
    return module


def _load():
    """The loaded module, or None; the outcome (and the reason for None) is kept."""
    global _module
    with _lock:
        if "module" in _state:
            return _state["module"]
        module, why = None, None
        try:
            compiler = _compiler()
            if compiler is None:
                why = "no C++ compiler found ($CXX, c++, g++ or clang++)"
            else:
                args = _build_args(compiler)
                module = _compiled.load(_open, *args, ".cpp", "the module")
                why = f"built with {os.path.basename(compiler)}"
        except (OSError, RuntimeError) as exc:
            module, why = None, f"{type(exc).__name__}: {exc}"
        _state.update(module=module, why=why)
        _module = module
        return module


def _start() -> None:
    """Load the module if it was built before, else build and load it in a thread; once."""
    with _lock:
        if "started" in _state or "module" in _state:
            return
        _state["started"] = True
    try:
        compiler = _compiler()
        built = compiler is None or _compiled.built(_compiled.targets(*_build_args(compiler)))
    except (OSError, RuntimeError):  # no cache folder to look in, or $CXX astray: _load says why
        built = True
    if built:
        _load()
        return
    threading.Thread(target=_load, name="posenc-host-build", daemon=True).start()


def available() -> bool:
    """Whether the module is built and loaded (building it on the first call, and waiting).

    Returns:
        True when a C++ compiler built the module against this torch and it loaded.

    Example:
        >>> isinstance(available(), bool)
        True
    """
    return _load() is not None


def status() -> str:
    """How the module was obtained, or why it is not available (building it if need be).

    Returns:
        ``"built with <compiler>"``, or the reason it could not be built or loaded.

    Example:
        >>> reasons = ("no C++ compiler", "RuntimeError", "OSError", "ImportError", "Timeout")
        >>> status().startswith(("built with", *reasons))
        True
    """
    _load()
    return _state["why"]
