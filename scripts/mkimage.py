#!/usr/bin/env python3
"""Build a single-layer OCI image-layout archive from a root filesystem directory.

The archive is what `skopeo copy ... oci-archive:FILE` and `podman save --format oci-archive`
produce and what `sbx image import` and `skopeo copy oci-archive:FILE docker://...` read:
`oci-layout`, `index.json` and `blobs/sha256/*` in a plain tar. The output is reproducible:
entries are sorted, times are zero, the layer is gzip'd with no timestamp. Numeric owners,
modes, symlinks and hard links are kept as they are in the directory (run as root to build a
rootfs with files owned by others).

Example:
    scripts/mkimage.py rootfs/ busybox.tar --ref sbx-test/busybox:latest \\
        --entrypoint '["/bin/sh", "-c", "sleep 3600"]' --env '["PATH=/bin"]'
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import platform
import shutil
import sys
import tarfile
import tempfile

CHUNK = 1024 * 1024
ARCHITECTURES = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "i686": "386"}


def json_list(text):
    """An argparse type: a JSON array of strings."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not JSON: {e}")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise argparse.ArgumentTypeError("expected a JSON array of strings")
    return value


def parse_args():
    parser = argparse.ArgumentParser(
        description="Build a single-layer OCI image archive from a directory.",
        epilog="Example: scripts/mkimage.py rootfs/ out.tar --ref sbx-test/busybox:latest "
        "--entrypoint '[\"/bin/sh\"]'",
    )
    parser.add_argument("rootfs", help="directory holding the image's root filesystem")
    parser.add_argument("output", help="archive to write (replaced atomically)")
    parser.add_argument("--ref", required=True, metavar="NAME:TAG",
                        help="image name stored in the index annotations, e.g. sbx-test/busybox:latest")
    parser.add_argument("--entrypoint", type=json_list, default=None, metavar="JSON",
                        help='Entrypoint as a JSON array, e.g. \'["/bin/sh", "-c"]\'')
    parser.add_argument("--cmd", type=json_list, default=None, metavar="JSON",
                        help="Cmd as a JSON array")
    parser.add_argument("--env", type=json_list, default=None, metavar="JSON",
                        help='Env as a JSON array of "KEY=value" (default: a standard PATH)')
    parser.add_argument("--workdir", default="/", help="WorkingDir (default /)")
    parser.add_argument("--user", default=None, help="User, e.g. 65532:65532 (default: root)")
    parser.add_argument("--label", action="append", default=[], metavar="KEY=VALUE",
                        help="a config label, e.g. org.opencontainers.image.version=1.0 (repeatable)")
    parser.add_argument("--arch", default=None,
                        help="architecture (default: this machine's, e.g. amd64)")
    args = parser.parse_args()
    if not os.path.isdir(args.rootfs):
        parser.error(f"{args.rootfs} is not a directory")
    for label in args.label:
        if "=" not in label or label.startswith("="):
            parser.error(f"--label {label!r} must be KEY=VALUE")
    name, sep, tag = args.ref.rpartition(":")
    if not sep or not name or not tag or "/" in tag:
        parser.error(f"--ref {args.ref!r} must be NAME:TAG")
    return args


class HashingWriter:
    """A binary file wrapper that hashes and counts what is written through it."""

    def __init__(self, raw):
        self.raw = raw
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data):
        self.sha.update(data)
        self.size += len(data)
        return self.raw.write(data)

    def flush(self):
        self.raw.flush()

    def digest(self):
        return "sha256:" + self.sha.hexdigest()


def write_layer(rootfs, tar_path, gz_path):
    """Writes the layer tar and its gzip; returns (diff_id, blob_digest, blob_size)."""
    with open(tar_path, "wb") as raw, open(gz_path, "wb") as gz_raw:
        plain = HashingWriter(raw)
        compressed = HashingWriter(gz_raw)
        with gzip.GzipFile(fileobj=compressed, mode="wb", mtime=0, compresslevel=6) as gz:
            class Tee:
                def write(self, data):
                    plain.write(data)
                    gz.write(data)
                    return len(data)

            with tarfile.open(fileobj=Tee(), mode="w|", format=tarfile.PAX_FORMAT) as tar:
                add_tree(tar, rootfs)
        return plain.digest(), compressed.digest(), compressed.size


def add_tree(tar, rootfs):
    """Adds every entry under rootfs, sorted, parents first, with zeroed times."""
    for root, dirs, files in os.walk(rootfs):
        dirs.sort()
        for name in sorted(dirs + files):
            path = os.path.join(root, name)
            arcname = os.path.relpath(path, rootfs)
            info = tar.gettarinfo(path, arcname)
            if info is None:  # sockets cannot be archived
                print(f"mkimage: skipping socket {arcname}", file=sys.stderr)
                continue
            info.mtime = 0
            info.uname = info.gname = ""
            if info.isreg():
                with open(path, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)


def blob_name(digest):
    return "blobs/sha256/" + digest.split(":", 1)[1]


def main():
    args = parse_args()
    arch = args.arch or ARCHITECTURES.get(platform.machine(), platform.machine())
    out_dir = os.path.dirname(os.path.abspath(args.output))
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".mkimage-") as work:
        layer_tar = os.path.join(work, "layer.tar")
        layer_gz = os.path.join(work, "layer.tar.gz")
        diff_id, layer_digest, layer_size = write_layer(args.rootfs, layer_tar, layer_gz)
        os.unlink(layer_tar)

        runtime = {
            "Env": args.env if args.env is not None
            else ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "WorkingDir": args.workdir,
        }
        if args.entrypoint is not None:
            runtime["Entrypoint"] = args.entrypoint
        if args.cmd is not None:
            runtime["Cmd"] = args.cmd
        if args.user:
            runtime["User"] = args.user
        if args.label:
            runtime["Labels"] = dict(label.split("=", 1) for label in args.label)
        config = {
            "created": "1970-01-01T00:00:00Z",
            "architecture": arch,
            "os": "linux",
            "config": runtime,
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "scripts/mkimage.py"}],
        }
        config_bytes = json.dumps(config, sort_keys=True).encode()
        config_digest = "sha256:" + hashlib.sha256(config_bytes).hexdigest()
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": config_digest, "size": len(config_bytes)},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest": layer_digest, "size": layer_size}],
        }
        manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
        manifest_digest = "sha256:" + hashlib.sha256(manifest_bytes).hexdigest()
        tag = args.ref.rpartition(":")[2]
        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest_digest,
                "size": len(manifest_bytes),
                "platform": {"architecture": arch, "os": "linux"},
                "annotations": {"io.containerd.image.name": args.ref,
                                "org.opencontainers.image.ref.name": tag},
            }],
        }

        partial = os.path.join(work, "out.tar")
        with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as out:
            def add_bytes(name, data):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o644
                out.addfile(info, io.BytesIO(data))

            add_bytes("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
            add_bytes("index.json", json.dumps(index, sort_keys=True).encode())
            add_bytes(blob_name(config_digest), config_bytes)
            add_bytes(blob_name(manifest_digest), manifest_bytes)
            info = tarfile.TarInfo(blob_name(layer_digest))
            info.size = layer_size
            info.mode = 0o644
            with open(layer_gz, "rb") as f:
                out.addfile(info, f)
        shutil.move(partial, args.output)
    print(f"mkimage: {args.output} {args.ref} {manifest_digest}", file=sys.stderr)


if __name__ == "__main__":
    main()
