#!/usr/bin/env python3
"""Packs a sealed `treeline` binary into a wheel that puts it on the PATH.

    build-wheel.py BINARY OUT_DIR [--version V]

The wheel holds the binary as a script (`treeline_server-V.data/scripts/treeline`),
as maturin's binary mode lays one out, so `pip install` copies it into the
environment's `bin/`. Its platform tag is the manylinux one the binary meets: the
newest glibc symbol version it asks for, read from the binary itself.

The binary must carry its site (`make build` seals it): a wheel of an unsealed one
would serve no dashboard.
"""

import argparse
import base64
import hashlib
import platform
import re
import sys
import zipfile
from pathlib import Path

NAME = "treeline_server"
MAGIC = b"TLSITE01"  # server/src/site/sealed.rs
# The shared libraries manylinux lets a wheel's binary link, as auditwheel's policy.
ALLOWED_LIBS = {"libc.so.6", "libm.so.6", "libgcc_s.so.1", "libpthread.so.0", "libdl.so.2",
                "librt.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}


def glibc_tag(binary: bytes) -> str:
    """manylinux_2_N_<arch>, N the newest GLIBC_2.N the binary's symbols name."""
    versions = [(int(a), int(b)) for a, b in re.findall(rb"GLIBC_(\d+)\.(\d+)", binary)]
    if not versions:
        sys.exit("build-wheel: the binary names no glibc version: is it a Linux binary?")
    major, minor = max(versions)
    return f"manylinux_{major}_{minor}_{platform.machine()}"


def needed_libs(binary: bytes) -> set:
    """The shared libraries the binary's dynamic string table names."""
    return {m.decode() for m in re.findall(rb"(?<=\0)(lib[a-z0-9_+-]+\.so\.\d+|ld-linux[a-z0-9_-]*\.so\.\d+)(?=\0)", binary)}


def record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--version", default="0.1.0")
    args = parser.parse_args()
    binary = args.binary.read_bytes()
    if not binary.endswith(MAGIC):
        sys.exit(f"build-wheel: {args.binary} carries no site: build it with `make build` (which seals it)")
    foreign = needed_libs(binary) - ALLOWED_LIBS
    if foreign:
        sys.exit(f"build-wheel: the binary links {sorted(foreign)}, which no manylinux wheel may")
    tag = f"py3-none-{glibc_tag(binary)}"
    version = args.version
    dist_info = f"{NAME}-{version}.dist-info"
    metadata = "\n".join([
        "Metadata-Version: 2.1",
        "Name: treeline-server",
        f"Version: {version}",
        "Summary: The Treeline server: the tracing dashboard for machine-learning runs, in one binary",
        "License: Apache-2.0",
        "Requires-Python: >=3.9",
        "",
        "Puts `treeline` on the PATH: `treeline serve --demo` serves the dashboard with",
        "demo data on http://127.0.0.1:3000. Install it with the SDK as",
        "`pip install \"treeline[server]\"`.",
        "",
    ])
    wheel = "\n".join(["Wheel-Version: 1.0", "Generator: treeline scripts/build-wheel.py",
                       "Root-Is-Purelib: false", f"Tag: {tag}", ""])
    files = [
        (f"{NAME}-{version}.data/scripts/treeline", binary, 0o755),
        (f"{dist_info}/METADATA", metadata.encode(), 0o644),
        (f"{dist_info}/WHEEL", wheel.encode(), 0o644),
    ]
    record = "".join(record_line(p, d) + "\n" for p, d, _ in files) + f"{dist_info}/RECORD,,\n"
    files.append((f"{dist_info}/RECORD", record.encode(), 0o644))
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / f"{NAME}-{version}-{tag}.whl"
    tmp = target.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path, data, mode in files:
            info = zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    tmp.replace(target)
    print(target)


if __name__ == "__main__":
    main()
