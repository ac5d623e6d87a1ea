#!/usr/bin/env python3
"""Makes kiln's self-contained wheel from a build and the release it packages.

usage: scripts/wheel.sh [--build-dir build/release] [--out-dir dist]   (this file does the work:
       wheel.py PKG_DIR RELEASE_LIB_DIR OUT_DIR VERSION)

The wheel holds the package a build assembled (<build>/python/kiln: the .py files, the stubs,
the nanobind extension) and, in kiln/lib/, the release tarball's lib/ (scripts/package.sh):
libkiln.so, the CUDA plugin when built, and every non-system library they need (oneDNN,
protobuf, libonnx, ...), each with run path $ORIGIN; the extension's run path is $ORIGIN/lib.
Only glibc, libstdc++ and libgcc_s come from the system, as for the tarball, so the wheel installs
on a Debian 12 (or newer glibc) machine with nothing but python3 and numpy. The tag is
cp<XY>-cp<XY>-linux_x86_64: the extension is built for this Python's ABI, and no manylinux
compliance is claimed (the libraries are Debian 12's, glibc 2.36).
"""
import base64
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile


def record_line(root, path):
    data = open(os.path.join(root, path), "rb").read()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def main():
    pkg, release_lib, out_dir, version = sys.argv[1:5]
    ext = [f for f in os.listdir(pkg) if f.startswith("_kiln") and f.endswith(".so")]
    if len(ext) != 1:
        sys.exit(f"wheel.py: expected one _kiln*.so in {pkg}, found {ext} (build with "
                 "KILN_BUILD_PYTHON=ON: scripts/build.sh does when nanobind is available)")
    abi = sysconfig.get_config_var("SOABI") or ""  # cpython-311-x86_64-linux-gnu
    if f".{abi}." not in ext[0]:
        sys.exit(f"wheel.py: {ext[0]} was not built for this Python ({abi})")
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    tag = f"{py}-{py}-linux_x86_64"
    name = f"kiln-{version}-{tag}.whl"
    with tempfile.TemporaryDirectory() as stage:
        dst = os.path.join(stage, "kiln")
        shutil.copytree(pkg, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        lib = os.path.join(dst, "lib")
        os.makedirs(lib)
        for f in sorted(os.listdir(release_lib)):
            src = os.path.join(release_lib, f)
            # Real files only (the soname links of the tarball would be copies in a zip), but
            # libkiln.so.<M.m> itself, the name the extension asks for.
            if not os.path.isfile(src) or ".so" not in f:
                continue
            if os.path.islink(src) and not f.startswith("libkiln.so."):
                continue
            shutil.copy2(src, os.path.join(lib, f), follow_symlinks=True)
        subprocess.run(["patchelf", "--set-rpath", "$ORIGIN/lib", os.path.join(dst, ext[0])],
                       check=True)
        subprocess.run(["strip", "--strip-unneeded", os.path.join(dst, ext[0])], check=True)
        info = os.path.join(stage, f"kiln-{version}.dist-info")
        os.makedirs(info)
        with open(os.path.join(info, "METADATA"), "w") as f:
            f.write(f"Metadata-Version: 2.1\nName: kiln\nVersion: {version}\n"
                    "Summary: An offline inference engine for ONNX vision models\n"
                    "Requires-Python: >=3.9\nRequires-Dist: numpy>=1.24\n")
        with open(os.path.join(info, "WHEEL"), "w") as f:
            f.write(f"Wheel-Version: 1.0\nGenerator: kiln scripts/wheel.py\n"
                    f"Root-Is-Purelib: false\nTag: {tag}\n")
        files = []
        for root, _, names in os.walk(stage):
            for n in names:
                files.append(os.path.relpath(os.path.join(root, n), stage))
        files.sort()
        record = f"kiln-{version}.dist-info/RECORD"
        lines = [record_line(stage, p) for p in files] + [f"{record},,"]
        with open(os.path.join(stage, record), "w") as f:
            f.write("\n".join(lines) + "\n")
        os.makedirs(out_dir, exist_ok=True)
        out = os.path.join(out_dir, name)
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            for p in files + [record]:
                full = os.path.join(stage, p)
                zi = zipfile.ZipInfo.from_file(full, p)
                zi.compress_type = zipfile.ZIP_DEFLATED
                with open(full, "rb") as fh:
                    z.writestr(zi, fh.read())
    size = os.path.getsize(out)
    print(f"{out} ({size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
