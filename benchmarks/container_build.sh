#!/usr/bin/env bash
# Issue 25's container build, for real, with no Docker engine and no container
# registry: makes a Debian bookworm base with debootstrap, imports it into
# podman as a local image, builds the project's Dockerfile on it (the runtime
# image, then its `test` target), and runs inside them `genimpute --version`,
# the README's quickstart (`bash examples/quickstart.sh`, in the runtime
# image with the checkout's examples/ mounted), an imputation in a fresh
# container from the example panel, a conversion of it, an imputation from
# the compact file and one of unphased targets with the own phaser in
# another and in a read-only container (failing if numba compiled anything
# there), and the README's test command (`python -m pytest -q`, in the test
# image).
# Prints each step's result and wall time and a summary; exits non-zero if
# any step fails. The whole output also goes to OUT_DIR/container_build.log.
#
#   bash benchmarks/container_build.sh        (as root: debootstrap and rootful podman)
#   bash benchmarks/container_build.sh clean  (removes CACHE_DIR, podman's storage included)
#
# Needs: podman (Debian's 4.3 here; it builds with its bundled buildah),
# runc (see below for why not crun) and debootstrap, installed from Debian's
# packages if missing, and the network to reach Debian's mirror and PyPI.
# Takes about 6.5 minutes on 2 idle cores from nothing (debootstrap 25 s,
# the build 2.5 min, the quickstart 1.3 min, the tests 2 min), 12 minutes
# when other work shared the cores; 2.7 GB under CACHE_DIR.
#
# Settings (environment):
#   CACHE_DIR        base tarball and podman's storage (default /tmp/genimpute-container);
#                    the base is made once and reused; `clean` starts over
#   OUT_DIR          log and quickstart output (default benchmarks/out)
#   DEBIAN_MIRROR, DEBIAN_SECURITY_MIRROR   for debootstrap and the base's apt sources
#   PIP_DIRS         local wheel directories and simple indexes (a directory with a
#                    simple/ inside) mounted read-only into the build for pip;
#                    default: those of /opt/wheels /opt/pypi /opt/pypi-more that
#                    exist (this machine's: torch's CPU wheel is in /opt/wheels)
#   PIP_CERT         CA bundle for pip's HTTPS, mounted likewise (default: the
#                    host pip's `cert` setting, if any)
#   TORCH_CPU_INDEX  the Dockerfile's argument (default here: empty, as PyTorch's
#                    index is not reachable from this machine)
#   BUILD_CACHE      1: reuse podman's layer cache from an earlier run (default 0:
#                    build from scratch, so that the times are the full build's)
#   STORAGE_DRIVER   overlay (default; the kernel's, as root) or vfs
#   ISOLATION        podman build's --isolation: oci (default) or chroot
#   RUNTIME          the OCI runtime: runc (default) or crun
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${CACHE_DIR:-/tmp/genimpute-container}
out=${OUT_DIR:-$root/benchmarks/out}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security_mirror=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
suite=bookworm
base_image=localhost/debian:bookworm-debootstrap
image=localhost/genimpute:0.2.0
test_image=localhost/genimpute:test

if [[ $EUID -ne 0 ]]; then
  echo "run as root: debootstrap needs it, and so does podman's kernel overlay storage" >&2
  exit 2
fi
missing=()  # installed from Debian's packages (of the same names) as .ci/run does
for tool in podman "${RUNTIME:-runc}" debootstrap; do
  command -v "$tool" > /dev/null || missing+=("$tool")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive timeout 15m apt-get install -y -qq "${missing[@]}" > /dev/null
fi

# podman with its own storage under CACHE_DIR (nothing in /var/lib/containers;
# removed with the cache). Without systemd (as here) podman itself picks the
# cgroupfs cgroup manager and the file events backend. Found on this machine
# (a VM whose root lacks CAP_SYS_RESOURCE, cgroup v1 with the v2 hierarchy
# also mounted and holding the hugetlb controller):
#  --runtime runc  crun 1.8 refuses such a "hybrid" layout ("cgroups in hybrid
#                  mode not supported, drop all controllers from cgroupv2"),
#                  even with --cgroups=disabled; runc 1.1 runs in it. (A build
#                  with --isolation chroot runs no OCI runtime and works with
#                  either, but `podman run` needs one.)
#  --ulimit        podman asks for nofile 1048576 by default; without
#                  CAP_SYS_RESOURCE a process cannot raise its hard limit
#                  ("setrlimit RLIMIT_NOFILE: Operation not permitted"), so
#                  the containers get the host's own hard limit; nproc stays
#                  at podman's 32768, which podman sets on itself (a higher
#                  one is refused alike)
podman=(podman --root "$cache/storage" --runroot "$cache/run" --tmpdir "$cache/tmp"
        --storage-driver "${STORAGE_DRIVER:-overlay}" --runtime "${RUNTIME:-runc}")
ulimits=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=32768:32768)

if [[ ${1:-} == clean ]]; then
  # podman's overlay storage can stay mounted on itself (seen after an
  # interrupted run), and a plain rm -rf then fails ("Device or resource
  # busy"): podman's reset unmounts and removes it
  if [[ -d $cache/storage ]]; then "${podman[@]}" system reset --force || umount "$cache/storage/overlay" || true; fi
  rm -rf "$cache"
  echo "removed $cache"
  exit 0
fi
mkdir -p "$out" "$cache"
exec > >(tee "$out/container_build.log") 2>&1
tee_pid=$!

names=() results=() walls=() lasts=()
step() {  # step NAME LIMIT CMD... : run CMD under `timeout LIMIT`, print and record its status and wall time
  local name=$1 limit=$2 start rc=0 wall steplog
  shift 2
  steplog=$cache/step.out
  printf '\n=== %s  (%s, limit %s)\n+ %s\n' "$name" "$(date -u '+%F %T UTC')" "$limit" "$*"
  start=$EPOCHREALTIME
  timeout --kill-after=60 "$limit" "$@" 2>&1 | tee "$steplog" || rc=$?
  wall=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  names+=("$name") walls+=("$wall") lasts+=("$(grep -v '^[[:space:]]*$' "$steplog" | tail -n 1 | cut -c1-100)")
  if [[ $rc -eq 0 ]]; then results+=(ok)
  elif [[ $rc -eq 124 ]]; then results+=("FAILED (timed out)")
  else results+=("FAILED (exit $rc)"); fi
  printf -- '--- %s: %s in %s s\n' "$name" "${results[-1]}" "$wall"
  return "$rc"
}

# shellcheck disable=SC2317  # summary and finish are called from the EXIT trap
summary() {
  local i total
  total=$(awk -v a="$script_start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  printf '\n=== Summary (total %s s)\n' "$total"
  for i in "${!names[@]}"; do
    printf '  %-34s %-22s %8s s   %s\n' "${names[$i]}" "${results[$i]}" "${walls[$i]}" "${lasts[$i]}"
  done
  if "${podman[@]}" image exists "$image" 2> /dev/null; then
    echo "  images:"
    "${podman[@]}" images --format '    {{.Repository}}:{{.Tag}}  {{.Size}}' | grep genimpute || true
  fi
  echo "  storage under $cache: $(du -sh "$cache" | cut -f1)"
  echo "  to use the images: ${podman[*]} run --rm ${ulimits[*]} $image --help"
}

script_start=$EPOCHREALTIME
echo "container build of $root, $(date -u '+%F %T UTC')"
echo "commit $(git -C "$root" rev-parse --short HEAD 2> /dev/null || echo '?'); changed since (git status --short):"
git -C "$root" status --short 2> /dev/null | sed 's/^/  /' || true
echo "kernel $(uname -r), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $(podman --version); $("${RUNTIME:-runc}" --version | head -n 1); debootstrap $(dpkg-query -W -f '${Version}' debootstrap 2> /dev/null)"
failed=0
# shellcheck disable=SC2317
finish() {  # the summary, then let tee write the log's last lines before the script ends
  summary
  exec > /dev/null 2>&1
  wait "$tee_pid" || true
}
trap finish EXIT

# 1. The base: Debian bookworm, minbase (apt, dpkg, bash, coreutils: what a
#    Debian image has), made once and kept as a tarball.
base_tar=$cache/debian-$suite-minbase.tar
if [[ -s $base_tar ]]; then
  echo "base: reusing $base_tar ($(du -h "$base_tar" | cut -f1))"
else
  rm -rf "$cache/rootfs"
  step "debootstrap $suite minbase" 30m debootstrap --variant=minbase "$suite" "$cache/rootfs" "$mirror"
  # apt sources as in Debian's images: the release, its updates and security
  rm -f "$cache/rootfs/etc/apt/sources.list"
  cat > "$cache/rootfs/etc/apt/sources.list.d/debian.sources" << EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security_mirror
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  # what an image need not carry: downloaded packages and package lists
  rm -rf "$cache/rootfs/var/cache/apt/archives/"*.deb "$cache/rootfs/var/lib/apt/lists/"*
  tar --numeric-owner --xattrs -C "$cache/rootfs" -cf "$base_tar.part" .
  mv "$base_tar.part" "$base_tar"
  rm -rf "$cache/rootfs"
  echo "base: made $base_tar ($(du -h "$base_tar" | cut -f1))"
fi

# 2. The base as a local image (podman import: no registry involved), with
#    the PATH and CMD that Debian's images declare: a tarball has no
#    environment, and the Dockerfile's `ENV PATH=/opt/venv/bin:$PATH` expands
#    the image's PATH, not a default.
step "import base image" 10m "${podman[@]}" import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' --change 'CMD ["bash"]' \
  "$base_tar" "$base_image"

# 3. The Dockerfile, on that base. Torch's CPU wheel and the local indexes
#    reach pip through read-only build-time volumes and PIP_OPTIONS; the
#    Dockerfile names none of this machine's paths.
#  --pull=never    the base is local; never ask a registry
#  --network host  apt and pip reach Debian's mirror and PyPI through the
#                  host's network, with no bridge, netavark or iptables rules
#  --force-rm      no intermediate container left behind, even on failure
#  PIP_DIRS' directories are mounted at /mnt/NAME (NAME: the last component),
#  and PIP_CERT (default: the host pip's `cert` setting) at /mnt/ca.crt: this
#  machine reaches PyPI through a TLS-intercepting proxy whose CA only the
#  host's bundle holds, and without it pip in the build fails
#  ("CERTIFICATE_VERIFY_FAILED ... self-signed certificate in certificate
#  chain"). Their mount points are made on the host, in a directory mounted
#  over /mnt first: buildah 1.28 otherwise leaves the empty mount points it
#  made in the image's layer.
stage=$cache/mnt
rm -rf "$stage" && mkdir -p "$stage"
volumes=(-v "$stage:/mnt:ro") pip_options=""
for dir in ${PIP_DIRS-/opt/wheels /opt/pypi /opt/pypi-more}; do
  [[ -d $dir ]] || continue
  name=$(basename "$dir")
  mkdir "$stage/$name"
  volumes+=(-v "$dir:/mnt/$name:ro")
  if [[ -d $dir/simple ]]; then pip_options+=" --extra-index-url file:///mnt/$name/simple"; else pip_options+=" --find-links /mnt/$name"; fi
done
cert=${PIP_CERT:-$(python3 -m pip config get global.cert 2> /dev/null || true)}
if [[ -n $cert ]]; then
  touch "$stage/ca.crt"
  volumes+=(-v "$cert:/mnt/ca.crt:ro")
  pip_options+=" --cert /mnt/ca.crt"
fi
build=("${podman[@]}" build --pull=never --network host --force-rm --isolation "${ISOLATION:-oci}" "${ulimits[@]}"
       --build-arg "BASE_IMAGE=$base_image" --build-arg "TORCH_CPU_INDEX=${TORCH_CPU_INDEX-}"
       --build-arg "PIP_OPTIONS=${pip_options# }" "${volumes[@]}" -f "$root/Dockerfile")
no_cache=(--no-cache)
[[ ${BUILD_CACHE:-0} == 1 ]] && no_cache=()
step "build runtime image" 60m "${build[@]}" "${no_cache[@]}" -t "$image" "$root"
# the test target reuses the runtime stage's layers just built
step "build test image (--target test)" 20m "${build[@]}" --target test -t "$test_image" "$root"
"${podman[@]}" image prune -f > /dev/null  # images left untagged by earlier runs

# 4. Inside the images, with no network: the version, the README's
#    quickstart as the unprivileged user (a scratch /data, chowned to that
#    user by :U, with the checkout's examples/ over it), an imputation in a
#    fresh container, the README's tests.
run=("${podman[@]}" run --rm --network none "${ulimits[@]}")
step "genimpute --version" 5m "${run[@]}" "$image" --version || failed=1
rm -rf "$out/container_quickstart" && mkdir -p "$out/container_quickstart"
step "quickstart (bash examples/quickstart.sh)" 30m "${run[@]}" -v "$out/container_quickstart:/data:U" \
  -v "$root/examples:/data/examples:ro" --entrypoint bash "$image" examples/quickstart.sh || failed=1
# a fresh container imputes with the numba code compiled at build time: a
# few seconds, where compiling first took about 30
step "impute --ref in a fresh container" 10m "${run[@]}" -v "$root/examples:/data/examples:ro" "$image" \
  -q impute examples/data/targets.omni2.5.vcf.gz --ref examples/data/panel.vcf.gz \
  --map examples/data/plink.chr20_8.9-9.4Mb.GRCh37.map --out /tmp/fresh.vcf.gz || failed=1
# and converts a panel and imputes from the compact file, and phases unphased
# targets with genimpute's own phaser, compiling nothing: numba writes a cache
# file beside the sources for whatever it compiles
# shellcheck disable=SC2016  # the script is the container's, expanded there
step "panel, impute from it, own phaser, nothing compiled, in a fresh container" 10m "${run[@]}" \
  -v "$root/examples:/data/examples:ro" --entrypoint bash "$image" -c '
  touch /tmp/start \
  && genimpute -q panel examples/data/panel.vcf.gz --map examples/data/plink.chr20_8.9-9.4Mb.GRCh37.map \
       --out /tmp/fresh.gpanel \
  && genimpute -q impute examples/data/targets.omni2.5.vcf.gz --ref /tmp/fresh.gpanel --out /tmp/fresh.vcf.gz \
  && gzip -dc examples/data/targets.omni2.5.vcf.gz | sed "/^#/!s/|/\//g" > /tmp/unphased.vcf \
  && genimpute -q impute /tmp/unphased.vcf --ref examples/data/panel.vcf.gz --phaser genimpute \
       --map examples/data/plink.chr20_8.9-9.4Mb.GRCh37.map --out /tmp/phased.vcf.gz \
  && compiled=$(find /opt/genimpute/genimpute -name "*.nb[ic]" -newer /tmp/start) \
  && if [ -n "$compiled" ]; then echo "compiled in the container: $compiled"; exit 1; fi' || failed=1
# and in a read-only container (as Apptainer or Kubernetes' readOnlyRootFilesystem run one; podman gives it a
# tmpfs /tmp), where genimpute points numba at /tmp with the build's compiled code copied in: it imputes, with
# the own phaser too, compiling nothing (every file there keeps its build-time stamp)
# shellcheck disable=SC2016  # the script is the container's, expanded there
step "impute, own phaser, nothing compiled, in a read-only container" 10m "${run[@]}" --read-only \
  -v "$root/examples:/data/examples:ro" --entrypoint bash "$image" -c '
  touch /tmp/start \
  && genimpute -q impute examples/data/targets.omni2.5.vcf.gz --ref examples/data/panel.vcf.gz \
       --map examples/data/plink.chr20_8.9-9.4Mb.GRCh37.map --out /tmp/fresh.vcf.gz \
  && gzip -dc examples/data/targets.omni2.5.vcf.gz | sed "/^#/!s/|/\//g" > /tmp/unphased.vcf \
  && genimpute -q impute /tmp/unphased.vcf --ref examples/data/panel.vcf.gz --phaser genimpute \
       --map examples/data/plink.chr20_8.9-9.4Mb.GRCh37.map --out /tmp/phased.vcf.gz \
  && copied=$(find /tmp/genimpute-numba-* -name "*.nb[ic]" | wc -l) \
  && compiled=$(find /tmp/genimpute-numba-* -name "*.nb[ic]" -newer /tmp/start) \
  && echo "$copied compiled files copied to /tmp" && [ "$copied" -gt 0 ] \
  && if [ -n "$compiled" ]; then echo "compiled in the container: $compiled"; exit 1; fi' || failed=1
step "tests (python -m pytest -q)" 60m "${run[@]}" "$test_image" python -m pytest -q || failed=1
exit "$failed"
