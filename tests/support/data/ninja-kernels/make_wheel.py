"""Write the test project's wheel: its library from build/ and a package, to the folder given."""

import base64
import hashlib
import os
import sys
import time
import zipfile
from pathlib import Path

NAME, VERSION, TAG = "ninja_kernels", "0.1.0", "py3-none-linux_x86_64"


def digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def main(out: Path) -> None:
    info = f"{NAME}-{VERSION}.dist-info"
    files = {
        f"{NAME}/__init__.py": b'"""The resumable-build test project."""\n',
        f"{NAME}/libkernels.so": Path("build/libkernels.so").read_bytes(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n".encode(),
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {TAG}\n".encode(),
    }
    record = "".join(f"{n},{digest(d)},{len(d)}\n" for n, d in files.items()) + f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record.encode()
    stamp = time.gmtime(max(315532800, int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))))[:6]
    with zipfile.ZipFile(out / f"{NAME}-{VERSION}-{TAG}.whl", "w") as archive:
        for name, data in files.items():
            entry = zipfile.ZipInfo(name, date_time=stamp)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = (0o100755 if name.endswith(".so") else 0o100644) << 16
            archive.writestr(entry, data)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
