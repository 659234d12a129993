#!/usr/bin/env bash
# make distro-check DIST=trixie: the course as a new user meets it on another Debian release.
#
# A pristine root (debootstrap --variant=minbase, plus git, make, gcc, python3, ca-certificates)
# is made once and kept under /var/tmp/hpclab-roots/<dist>/pristine. Each check copies it to a
# work root, puts a fresh `git clone` of this checkout's HEAD in /root/hpclab (commit first: the
# clone sees no uncommitted change), and runs, chrooted:
#   1. `make setup` with the network (apt and PyPI), in its own PID, mount and UTS namespaces;
#   2. the cluster and the course in a fresh network namespace as well (only loopback, up): this
#      machine may run its own embedded cluster on the same fixed loopback ports
#      (hpclab/cluster/config.py PORTS), which the check must never meet.
# The check's Slurm gets its own cgroup subtree (/sys/fs/cgroup/<controller>/hpclab-check-<dist>,
# bind-mounted as the root's /sys/fs/cgroup/<controller>), so its cgroups never collide with the
# host's cluster's. Every process of the check dies with its PID namespace.
#
# Usage: scripts/distro-check.sh DIST [NOTEBOOK...]
#   DIST        a Debian suite debootstrap knows (trixie, bookworm) or an Ubuntu one (noble, jammy)
#   NOTEBOOK    names under notebooks/ or labs/ (e.g. 00-getting-started); none: the whole `make course`
# Environment: MIRROR (default: this machine's first Debian mirror), KEEP=1 reuses the last work
#   root with its installed packages and venv instead of a fresh copy (faster, not pristine),
#   QUICK=1 runs the course with --quick, ROOT_ONLY=1 only makes (or finds) the pristine root,
#   NET=ipv4 gives the course's eth0 an IPv4 address only (default dual-stack: IPv4, an IPv6
#   unique-local address and a link-local one, the network most learners have).
# Writes the log and a one-line result per phase to /var/tmp/hpclab-roots/<dist>/results.log.
set -euo pipefail
# bash reads a script as it runs: run from a private copy, so that editing the checkout during a
# check (it takes a while) cannot change the running one.
if [[ -z ${HPCLAB_CHECKOUT:-} ]]; then
  copy=$(mktemp /tmp/hpclab-distro-check.XXXXXX)
  cp "$0" "$copy"
  HPCLAB_CHECKOUT=$(cd "$(dirname "$0")/.." && pwd) exec bash "$copy" "$@"
fi
CHECKOUT=$HPCLAB_CHECKOUT
rm -f "$0"   # the private copy; bash keeps reading it through its open descriptor
cd "$CHECKOUT"

DIST=${1:?usage: scripts/distro-check.sh DIST [NOTEBOOK...]}
shift
NOTEBOOKS=("$@")
BASE=/var/tmp/hpclab-roots/$DIST
PRISTINE=$BASE/pristine
WORK=$BASE/work
APT_CACHE=$BASE/apt-archives   # downloaded .debs kept between checks (apt verifies them again)
HOST=hpclab-$DIST              # the chroot's host name, in its own UTS namespace
CG_NAME=hpclab-check-$DIST
RESULTS=$BASE/results.log
NET=${NET:-dual-stack}          # the course's network: dual-stack (IPv4 and IPv6, as most machines) or ipv4
[[ $NET == dual-stack || $NET == ipv4 ]] || die "NET must be dual-stack or ipv4, not '$NET'"

say() { printf '[distro-check %s] %s\n' "$DIST" "$*"; }
die() { say "ERROR: $*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || die "needs root (debootstrap, chroot, namespaces); run: sudo make distro-check DIST=$DIST"
for tool in unshare chroot ip git; do command -v "$tool" >/dev/null || die "'$tool' is missing on this machine"; done
if ! command -v debootstrap >/dev/null; then
  say "installing debootstrap on this machine"
  apt-get install -y -q debootstrap >/dev/null
fi
# Ubuntu's archive key, to check what debootstrap downloads: the host's ubuntu-keyring if installed,
# else Ubuntu's own package, fetched over HTTPS from the archive (TLS is the trust anchor there) and
# checked against the SHA256 its Packages index gives. Kept in /var/tmp/hpclab-roots/ubuntu-keyring.
ubuntu_keyring() {
  local host_key=/usr/share/keyrings/ubuntu-archive-keyring.gpg dir=/var/tmp/hpclab-roots/ubuntu-keyring
  if [[ -e $host_key ]]; then echo "$host_key"; return; fi
  if [[ ! -e $dir$host_key ]]; then
    local base=https://archive.ubuntu.com/ubuntu entry file sum
    entry=$(curl -fsS --max-time 120 "$base/dists/$1/main/binary-amd64/Packages.gz" | gzip -dc |
            awk '/^Package: ubuntu-keyring$/{f=1} f&&/^(Filename|SHA256):/{print $2} /^$/{f=0}') ||
      die "cannot read Ubuntu's package index from $base"
    file=$(sed -n 1p <<<"$entry"); sum=$(sed -n 2p <<<"$entry")
    [[ -n $file && -n $sum ]] || die "no ubuntu-keyring in Ubuntu's $1 index"
    mkdir -p "$dir"
    curl -fsS --max-time 120 "$base/$file" -o "$dir/keyring.deb" || die "cannot download $base/$file"
    echo "$sum  $dir/keyring.deb" | sha256sum -c --quiet - >&2 || die "ubuntu-keyring's checksum does not match its index"
    dpkg-deb -x "$dir/keyring.deb" "$dir"
  fi
  echo "$dir$host_key"
}

# Ubuntu's releases come from Ubuntu's archive, with universe (Slurm, likwid and OTF2 live there);
# debootstrap builds every Ubuntu release with the same script (gutsy), which an older debootstrap
# may not have linked under the new release's name.
DEBOOTSTRAP_ARGS=(--variant=minbase --include=git,make,gcc,python3,ca-certificates)
SCRIPT=/usr/share/debootstrap/scripts/$DIST
case $DIST in
  jammy|noble|oracular|plucky|questing|resolute)
    DEFAULT_MIRROR=http://archive.ubuntu.com/ubuntu
    DEBOOTSTRAP_ARGS+=(--components=main,universe)
    [[ -e $SCRIPT ]] || SCRIPT=/usr/share/debootstrap/scripts/gutsy
    DEBOOTSTRAP_ARGS+=(--keyring="$(ubuntu_keyring "$DIST")") ;;
  *) DEFAULT_MIRROR="" ;;
esac
[[ -e $SCRIPT ]] || die "debootstrap does not know '$DIST' (see /usr/share/debootstrap/scripts)"

# The mirror this machine already uses (apt's deb822 or one-line sources), else Debian's CDN.
mirror() {
  local m
  m=$(grep -hoE '^URIs:[[:space:]]*https?://[^[:space:]]+/debian/?$' /etc/apt/sources.list.d/*.sources 2>/dev/null |
      head -1 | awk '{print $2}') || true
  [[ -n $m ]] || m=$(grep -hoE '^deb[[:space:]]+https?://[^[:space:]]+/debian/?[[:space:]]' /etc/apt/sources.list \
                     /etc/apt/sources.list.d/*.list 2>/dev/null | head -1 | awk '{print $2}') || true
  echo "${m:-http://deb.debian.org/debian}"
}
MIRROR=${MIRROR:-${DEFAULT_MIRROR:-$(mirror)}}

stamp() { date -u +%Y-%m-%dT%H:%M:%SZ; }
record() { printf '%s %s %s\n' "$(stamp)" "$DIST" "$*" | tee -a "$RESULTS"; }
mkdir -p "$BASE"

# 0. The pristine root, made once ------------------------------------------------------------------
if [[ ! -f $PRISTINE/.hpclab-pristine ]]; then
  say "debootstrap $DIST from $MIRROR into $PRISTINE (once; reused by later checks)"
  rm -rf "$PRISTINE.partial"
  t0=$SECONDS
  debootstrap "${DEBOOTSTRAP_ARGS[@]}" "$DIST" "$PRISTINE.partial" "$MIRROR" "$SCRIPT"
  printf '%s from %s, %s\n' "$DIST" "$MIRROR" "$(stamp)" > "$PRISTINE.partial/.hpclab-pristine"
  rm -rf "$PRISTINE"
  mv "$PRISTINE.partial" "$PRISTINE"
  record "debootstrap $((SECONDS - t0)) s"
fi

if [[ ${ROOT_ONLY:-0} == 1 ]]; then say "ROOT_ONLY=1: the pristine root is in $PRISTINE"; exit 0; fi

# 1. The work root: a copy of the pristine one and a fresh clone -----------------------------------
if [[ ${KEEP:-0} == 1 && -d $WORK/root/hpclab ]]; then
  say "KEEP=1: reusing $WORK (packages and venv from the last check)"
  rm -rf "$WORK/root/hpclab.new"
  git clone -q "$CHECKOUT" "$WORK/root/hpclab.new"
  # keep the built venv and build/; take the new sources
  for kept in .venv build; do [[ -e $WORK/root/hpclab/$kept ]] && mv "$WORK/root/hpclab/$kept" "$WORK/root/hpclab.new/"; done
  rm -rf "$WORK/root/hpclab"
  mv "$WORK/root/hpclab.new" "$WORK/root/hpclab"
else
  say "fresh work root: copying $PRISTINE"
  rm -rf "$WORK"
  cp -a "$PRISTINE" "$WORK"
  git clone -q "$CHECKOUT" "$WORK/root/hpclab"
fi
say "clone of $(git -C "$CHECKOUT" rev-parse --short HEAD) in $WORK/root/hpclab"
cp /etc/resolv.conf "$WORK/etc/resolv.conf"
# This machine's own certificate authorities and pip settings (a proxy that inspects TLS brings
# its own CA): the root must trust what the host trusts to reach PyPI. Nothing else is copied.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$WORK/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$WORK/usr/local/share/ca-certificates/"
  chroot "$WORK" update-ca-certificates >/dev/null 2>&1 || say "WARNING: update-ca-certificates failed in the root"
fi
[[ -f /etc/pip.conf ]] && cp /etc/pip.conf "$WORK/etc/pip.conf"
echo "$HOST" > "$WORK/etc/hostname"
grep -q "[[:space:]]$HOST\$" "$WORK/etc/hosts" 2>/dev/null || printf '127.0.1.1\t%s\n' "$HOST" >> "$WORK/etc/hosts"
mkdir -p "$APT_CACHE/partial" "$WORK/var/cache/apt/archives"

# The check's own cgroup subtrees (cgroup v1: memory for Slurm's task/cgroup, cpuset for virtual
# nodes). A cpuset child starts with no CPUs: give it its parent's.
CG_CONTROLLERS=()
if [[ $(stat -fc %T /sys/fs/cgroup) != cgroup2fs ]]; then
  for c in cpuset memory; do
    [[ -d /sys/fs/cgroup/$c ]] || continue
    mkdir -p "/sys/fs/cgroup/$c/$CG_NAME"
    if [[ $c == cpuset ]]; then
      cat /sys/fs/cgroup/cpuset/cpuset.cpus > "/sys/fs/cgroup/cpuset/$CG_NAME/cpuset.cpus"
      cat /sys/fs/cgroup/cpuset/cpuset.mems > "/sys/fs/cgroup/cpuset/$CG_NAME/cpuset.mems"
    fi
    CG_CONTROLLERS+=("$c")
  done
fi
cleanup_cgroups() {
  for c in "${CG_CONTROLLERS[@]}"; do
    # only our own subtree; rmdir refuses a cgroup that still holds a process
    find "/sys/fs/cgroup/$c/$CG_NAME" -depth -mindepth 1 -type d -exec rmdir {} + 2>/dev/null || true
    rmdir "/sys/fs/cgroup/$c/$CG_NAME" 2>/dev/null || true
  done
}
trap cleanup_cgroups EXIT

# Runs inside the new namespaces: mounts (private to this mount namespace), then the new root.
# $1: "net" when this is a fresh network namespace (bring loopback up); the rest: the command.
INNER='
set -eu
root=$1 host=$2 netns=$3 apt_cache=$4 controllers=$5 family=$6; shift 6
mount --make-rprivate /
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount -t tmpfs -o mode=755 cgroup "$root/sys/fs/cgroup"
for c in $controllers; do
  mkdir -p "$root/sys/fs/cgroup/$c"
  mount --bind "/sys/fs/cgroup/$c/hpclab-check-${host#hpclab-}" "$root/sys/fs/cgroup/$c"
done
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=1777 shm "$root/dev/shm"
mount -t tmpfs -o mode=755 run "$root/run"
mount --bind "$apt_cache" "$root/var/cache/apt/archives"
hostname "$host"
if [ "$netns" = net ]; then
  # loopback, and one Ethernet-like interface on a documentation-only network (192.0.2.0/24,
  # TEST-NET-1, routed nowhere): Open MPI'"'"'s tcp BTL leaves loopback out, and a real machine has a NIC.
  # As most learners'"'"' machines, dual-stack unless NET=ipv4: an IPv6 unique-local address and a
  # link-local one beside IPv4 (Open MPI 5.0.7 paired no TCP interfaces on such a host, issue 41)
  ip link set lo up
  [ "$family" = ipv4 ] || sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
  ip link add eth0 type veth peer name eth0-peer
  ip addr add 192.0.2.10/24 dev eth0
  [ "$family" = ipv4 ] || ip addr add fd00::10/64 dev eth0 nodad
  ip link set eth0-peer up
  ip link set eth0 up
  echo "[distro-check] the course'"'"'s network: $(ip -br addr show eth0 | tr -s " ")"
fi
# The root becomes the mount namespace'"'"'s own (pivot_root), not a chroot: the kernel refuses a
# user namespace to a chrooted process, and the code labs'"'"' grader (bubblewrap) needs one, as on
# any machine. The host'"'"'s root is unmounted from the check'"'"'s view.
cd "$root"
mkdir -p .host-root
pivot_root . .host-root
umount -l /.host-root
rmdir /.host-root
exec /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/bash -lc "cd /root && $*"
'

# phase NAME NET COMMAND: one namespaced, chrooted command, timed and recorded.
phase() {
  local name=$1 net=$2 cmd=$3 t0=$SECONDS rc=0
  local flags=(--pid --mount --uts --fork --kill-child)
  [[ $net == net ]] && flags+=(--net)
  say "phase '$name': $cmd ($([[ $net == net ]] && echo "own network namespace ($NET), nothing routed out" || echo 'with the network'))"
  unshare "${flags[@]}" /bin/sh -c "$INNER" inner "$WORK" "$HOST" "$net" "$APT_CACHE" "${CG_CONTROLLERS[*]}" "$NET" "$cmd" || rc=$?
  record "$name rc=$rc $((SECONDS - t0)) s$([[ $net == net ]] && echo " ($NET network)")"
  return $rc
}

versions='echo "== $(. /etc/os-release; echo $PRETTY_NAME)"; ompi_info --parsable 2>/dev/null | grep -m1 "^ompi:version:full" || true;
          slurmd -V 2>/dev/null || true; python3 --version; uname -r'
phase setup host "cd /root/hpclab && make setup && { $versions; }"
if ((${#NOTEBOOKS[@]})); then
  books=()
  for n in "${NOTEBOOKS[@]}"; do
    if [[ -e notebooks/$n.ipynb ]]; then books+=("notebooks/$n.ipynb")
    elif [[ -e labs/$n/$n.ipynb ]]; then books+=("labs/$n/$n.ipynb")
    else die "no notebook or lab named '$n'"; fi
  done
  phase course net "cd /root/hpclab && make cluster-up && .venv/bin/hpclab course run ${QUICK:+--quick} ${books[*]}"
else
  phase course net "cd /root/hpclab && make cluster-up && .venv/bin/hpclab course run ${QUICK:+--quick}"
fi
say "done: results in $RESULTS; executed notebooks in $WORK/root/hpclab/build/course/"
