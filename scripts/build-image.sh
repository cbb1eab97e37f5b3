#!/usr/bin/env bash
# Build shellmcp's OCI image (issue 44) from the release tarball, with Debian's tools and no image registry:
#
#   bash scripts/build-image.sh [--base debian|scratch] [--rebuild]
#     → dist/image/shellmcp-<version>-linux-x64.oci.tar   (-scratch.oci.tar for --base scratch; an OCI archive: `podman load -i FILE`, `skopeo copy
#                                                           oci-archive:FILE …`, `ctr images import FILE`)
#
# What goes in:
# - the release tarball dist/release/shellmcp-<version>-linux-x64.tar.gz (built by `bun build.ts --release` when
#   missing or with --rebuild) unpacked at /opt/shellmcp, `shellmcp` and its role links in /usr/local/bin, the
#   starter rules as the system rules (/etc/codex/rules/agent.rules; a ConfigMap mounted there replaces them);
# - the base (layer 1):
#   - `debian` (default): a minimal Debian bookworm root made by mmdebstrap (variant minbase, plus git, bubblewrap
#     and ca-certificates; no documentation, man pages or apt lists): the commands an agent runs need a userland;
#   - `scratch`: only what the executable needs (its dynamic loader and the four glibc libraries `ldd` names,
#     /etc/passwd with root alone, /tmp): the patched shells it carries run, their builtins work, and nothing else
#     (no ls, no git) — for an exec-server that only runs the programs the image adds on top;
# - no secret, no token, no CODEX_HOME: they come from the pod (docs/deploy.md);
# - user 65532:65532 (no passwd entry needed: any uid works, OpenShift's arbitrary ones included), HOME
#   /home/shellmcp (the portable shells are extracted there at the first start; mount an emptyDir there under a
#   read-only root), working folder /workspace, both owned 65532:0 mode 0770 (group 0 for arbitrary uids).
# Entrypoint `shellmcp`; the default command is the exec-server on ws://0.0.0.0:8080 with its token from the
# secret volume; labels name the other entrypoints (`serve` on stdio, and `serve --listen http://0.0.0.0:8080`, MCP
# over HTTP, only when this build's `serve` has `--listen`).
#
# Tools: tar, gzip, sha256sum, mmdebstrap (base debian; `apt-get install mmdebstrap`), and python3 for the JSON.
# Reproducible: every time stamp is SOURCE_DATE_EPOCH (default: the last commit's time), tar sorted by name with
# numeric owners, gzip -n. Runs as root (mmdebstrap's root mode, and files owned by 65532 in the layer).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

BASE=debian
REBUILD=0
while [ $# -gt 0 ]; do
  case "$1" in
    --base) BASE=$2; shift 2 ;;
    --base=*) BASE=${1#--base=}; shift ;;
    --rebuild) REBUILD=1; shift ;;
    -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "build-image.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$BASE" in debian | scratch) ;; *) echo "build-image.sh: --base must be debian or scratch (got $BASE)" >&2; exit 2 ;; esac
[ "$(uname -m)" = x86_64 ] || { echo "build-image.sh: builds the linux-x64 image on x86_64 only (this is $(uname -m))" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "build-image.sh: run as root (mmdebstrap's root mode; layer files owned by uid 65532)" >&2; exit 1; }
need() { command -v "$1" >/dev/null || { echo "build-image.sh: $1 is missing: $2" >&2; exit 1; }; }
need tar "apt-get install tar"
need gzip "apt-get install gzip"
need sha256sum "apt-get install coreutils"
need python3 "apt-get install python3"
[ "$BASE" = scratch ] || need mmdebstrap "apt-get install mmdebstrap (or --base scratch)"

VERSION=$(python3 -c 'import json,sys; print(json.load(open("package.json"))["version"])')
TARGET=linux-x64
NAME=shellmcp-$VERSION-$TARGET
TARBALL=$ROOT/dist/release/$NAME.tar.gz
OUT_DIR=$ROOT/dist/image
SUFFIX=""
[ "$BASE" = debian ] || SUFFIX=-$BASE
OUT=$OUT_DIR/$NAME$SUFFIX.oci.tar
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
UID_GID=65532

if [ "$REBUILD" = 1 ] || [ ! -f "$TARBALL" ]; then
  echo "build-image.sh: building the release tarball ($TARBALL)" >&2
  SHELLMCP_RELEASE_TARGETS=$TARGET "$ROOT/node_modules/.bin/bun" build.ts --release >&2
fi
[ -f "$TARBALL" ] || { echo "build-image.sh: no release tarball at $TARBALL" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/shellmcp-image.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/blobs" "$WORK/app" "$WORK/base"

# Deterministic tar of folder $1 into $2 (uncompressed; owners as they are on disk, numeric).
pack() {
  tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime --numeric-owner --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -C "$1" -cf "$2" .
}

# Layer 1: the base.
if [ "$BASE" = debian ]; then
  mmdebstrap --quiet --variant=minbase --mode=root --format=tar \
    --include=git,bubblewrap,ca-certificates \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/* "$1"/etc/machine-id' \
    --customize-hook='touch "$1"/etc/machine-id' \
    bookworm "$WORK/base.tar"
else
  B=$WORK/base
  # Mount points a runtime (or a read-only root) cannot create: /dev, /proc, /sys, and /mnt for a test's tools.
  mkdir -p "$B/etc" "$B/tmp" "$B/lib64" "$B/lib/x86_64-linux-gnu" "$B/bin" "$B/dev" "$B/proc" "$B/sys" "$B/mnt"
  chmod 1777 "$B/tmp"
  for lib in $(ldd "$ROOT/dist/shellmcp" | grep -o '/[^ ]*' | sort -u); do
    cp -L "$lib" "$B$lib"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\n' >"$B/etc/passwd"
  printf 'root:x:0:\n' >"$B/etc/group"
  pack "$B" "$WORK/base.tar"
fi

# Layer 2: shellmcp.
A=$WORK/app
mkdir -p "$A/opt" "$A/usr/local/bin" "$A/etc/codex/rules" "$A/home/shellmcp" "$A/workspace" "$A/run/secrets/shellmcp"
tar -xzf "$TARBALL" -C "$A/opt"
mv "$A/opt/$NAME" "$A/opt/shellmcp"
for l in shellmcp codex-execve-wrapper codex-linux-sandbox codex-fs; do ln -s "/opt/shellmcp/$l" "$A/usr/local/bin/$l"; done
cp "$A/opt/shellmcp/starter/rules/agent.rules" "$A/etc/codex/rules/agent.rules"
chmod 0644 "$A/etc/codex/rules/agent.rules"
chown "$UID_GID:0" "$A/home/shellmcp" "$A/workspace"
chmod 0770 "$A/home/shellmcp" "$A/workspace"
pack "$A" "$WORK/app.tar"

# Whether this build's serve has --listen (MCP over HTTP, another issue): the image names that entrypoint only then.
HTTP=0
if tar -xOzf "$TARBALL" "$NAME/shellmcp" >"$WORK/shellmcp" && chmod +x "$WORK/shellmcp" &&
  "$WORK/shellmcp" serve --help 2>/dev/null | grep -q -- '--listen'; then
  HTTP=1
fi

python3 - "$WORK" "$VERSION" "$SOURCE_DATE_EPOCH" "$BASE" "$HTTP" "$UID_GID" <<'PY'
import gzip, hashlib, json, os, shutil, sys, datetime
work, version, epoch, base, http, uid = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5] == "1", sys.argv[6]
blobs = os.path.join(work, "blobs", "sha256")
os.makedirs(blobs, exist_ok=True)
created = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

def put(data: bytes) -> str:
    d = hashlib.sha256(data).hexdigest()
    with open(os.path.join(blobs, d), "wb") as f:
        f.write(data)
    return d

layers, diff_ids = [], []
for name in ("base.tar", "app.tar"):
    raw = open(os.path.join(work, name), "rb").read()
    diff_ids.append("sha256:" + hashlib.sha256(raw).hexdigest())
    gz = gzip.compress(raw, compresslevel=9, mtime=0)
    layers.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": "sha256:" + put(gz), "size": len(gz)})

secret = "/run/secrets/shellmcp"
exec_server = ["exec-server", "--listen", "ws://0.0.0.0:8080", "--ws-auth", "capability-token", "--ws-token-file", f"{secret}/token"]
labels = {
    "org.opencontainers.image.title": "shellmcp",
    "org.opencontainers.image.version": version,
    "org.opencontainers.image.description": "A sandboxed shell for AI agents: Codex's exec-server and an MCP server (docs/deploy.md)",
    "org.opencontainers.image.base.name": "debian:bookworm (mmdebstrap minbase)" if base == "debian" else "scratch",
    "io.shellmcp.entrypoint.exec-server": "shellmcp " + " ".join(exec_server),
    "io.shellmcp.entrypoint.serve": "shellmcp serve",
    "io.shellmcp.entrypoint.mcp-http": "shellmcp serve --listen http://0.0.0.0:8080" if http
    else "none in this build (serve has no --listen yet: MCP over HTTP is another issue)",
}
config = {
    "created": created,
    "architecture": "amd64",
    "os": "linux",
    "config": {
        "User": f"{uid}:{uid}",
        "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/home/shellmcp", "LANG=C.UTF-8"],
        "Entrypoint": ["/usr/local/bin/shellmcp"],
        "Cmd": exec_server,
        "WorkingDir": "/workspace",
        "ExposedPorts": {"8080/tcp": {}},
        "Labels": labels,
    },
    "rootfs": {"type": "layers", "diff_ids": diff_ids},
    "history": [{"created": created, "created_by": f"scripts/build-image.sh: base {base}"},
                {"created": created, "created_by": f"scripts/build-image.sh: shellmcp {version}"}],
}
cb = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
manifest = {
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "sha256:" + put(cb), "size": len(cb)},
    "layers": layers,
    "annotations": {"org.opencontainers.image.created": created},
}
mb = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
index = {
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.index.v1+json",
    "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": "sha256:" + put(mb),
        "size": len(mb),
        "platform": {"architecture": "amd64", "os": "linux"},
        "annotations": {"org.opencontainers.image.ref.name": f"localhost/shellmcp:{version}"},
    }],
}
os.makedirs(os.path.join(work, "oci"), exist_ok=True)
shutil.move(os.path.join(work, "blobs"), os.path.join(work, "oci", "blobs"))
with open(os.path.join(work, "oci", "index.json"), "w") as f:
    json.dump(index, f, sort_keys=True, separators=(",", ":"))
with open(os.path.join(work, "oci", "oci-layout"), "w") as f:
    json.dump({"imageLayoutVersion": "1.0.0"}, f)
PY

mkdir -p "$OUT_DIR"
tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --numeric-owner --owner=0 --group=0 --format=posix \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -C "$WORK/oci" -cf "$OUT.partial" oci-layout index.json blobs
mv "$OUT.partial" "$OUT"
echo "$OUT ($(du -h "$OUT" | cut -f1), base $BASE, MCP over HTTP entrypoint: $([ $HTTP = 1 ] && echo yes || echo 'not in this build'))"
