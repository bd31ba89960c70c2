#!/usr/bin/env bash
# Builds the tiny microVM guest (issue 14) from Debian packages:
#   scripts/build-guest.sh [OUT_DIR]     (default: build/guest in the repo)
# Outputs OUT_DIR/vmlinuz (Debian's cloud kernel), OUT_DIR/initramfs.cpio.gz
# (busybox-static, the virtio modules, the host's curl and its libraries,
# scripts/guest/init as /init) and OUT_DIR/manifest.txt (what went in).
# docs/guest-image.md describes the image and the per-VM config archive.
#
# Idempotent: does nothing when the outputs are newer than every input and the
# kernel package is still apt's candidate. Installs busybox-static,
# qemu-system-x86, cpio and curl when missing. Never installs a kernel on the
# host: the kernel package is `apt-get download`ed and unpacked in a scratch dir.
# Nothing secret goes into the image.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out_dir="${1:-$repo_root/build/guest}"
init_src="$repo_root/scripts/guest/init"
self="$repo_root/scripts/build-guest.sh"
kernel_meta=linux-image-cloud-amd64
# Dependency order: each module needs only those before it (checked against
# each module's .modinfo below). MACHINE-FACTS.md "TAP and microVMs".
# virtio_console gives the command agent its virtio-serial ports (/dev/vport*);
# virtio_blk and ext4 (with what ext4 needs) give the guest its disk, /dev/vda;
# Debian's cloud kernel builds ext4 and its helpers in.
modules=(virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci
  virtio_mmio failover net_failover virtio_net virtio_blk virtio_console
  crc16 crc32c_generic mbcache jbd2 ext4)

say() { echo "build-guest: $*"; }
die() {
  echo "build-guest: $*" >&2
  exit 1
}

[ "$(id -u)" -eq 0 ] || die "run as root (installs packages, makes /dev/console in the image)"

# --- host packages ---------------------------------------------------------
PACKAGES=(busybox-static qemu-system-x86 cpio curl xz-utils)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" < /dev/null
fi
busybox=/bin/busybox
curl_bin=/usr/bin/curl
[ -x "$busybox" ] || die "$busybox missing after installing busybox-static"
[ -x "$curl_bin" ] || die "$curl_bin missing"

# --- the kernel package apt would install today ----------------------------
kernel_pkg_of_meta() {
  apt-cache depends "$kernel_meta" 2> /dev/null |
    awk '$1 == "Depends:" && $2 ~ /^linux-image-/ && !found { print $2; found = 1 }'
}
kernel_pkg=$(kernel_pkg_of_meta)
if [ -z "$kernel_pkg" ]; then
  apt-get update -qq
  kernel_pkg=$(kernel_pkg_of_meta)
fi
[ -n "$kernel_pkg" ] || die "apt knows no $kernel_meta"
kernel_ver=$(apt-cache policy "$kernel_pkg" | awk '$1 == "Candidate:" { print $2 }')
if [ -z "$kernel_ver" ] || [ "$kernel_ver" = "(none)" ]; then
  die "no candidate for $kernel_pkg"
fi
kernel_line="kernel-package: $kernel_pkg $kernel_ver"

# curl's libraries and the dynamic loader, as ldd names them.
curl_libs=()
while read -r lib; do curl_libs+=("$lib"); done < <(
  ldd "$curl_bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u
)
[ ${#curl_libs[@]} -gt 0 ] || die "ldd named no library for $curl_bin"

# --- up to date? -------------------------------------------------------------
vmlinuz="$out_dir/vmlinuz"
initramfs="$out_dir/initramfs.cpio.gz"
manifest="$out_dir/manifest.txt"
up_to_date() {
  local f
  for f in "$vmlinuz" "$initramfs" "$manifest"; do [ -f "$f" ] || return 1; done
  grep -qxF "$kernel_line" "$manifest" || return 1
  for f in "$self" "$init_src" "$busybox" "$curl_bin" "${curl_libs[@]}"; do
    # -nt follows symlinks: a library upgrade is seen through its .so link.
    [ "$f" -nt "$vmlinuz" ] && return 1
    [ "$f" -nt "$initramfs" ] && return 1
  done
  return 0
}
if up_to_date; then
  say "$out_dir is up to date ($kernel_pkg $kernel_ver)"
  exit 0
fi

mkdir -p "$out_dir"
scratch=$(mktemp -d /tmp/zn-build-guest.XXXXXX)
trap 'rm -rf "$scratch"' EXIT

# --- download and unpack the kernel (cached in OUT_DIR/cache) ---------------
cache="$out_dir/cache"
mkdir -p "$cache"
deb=$(find "$cache" -maxdepth 1 -name "${kernel_pkg}_*.deb" -print -quit)
if [ -z "$deb" ] || [ "$(dpkg-deb -f "$deb" Version)" != "$kernel_ver" ]; then
  rm -f "$cache"/linux-image-*.deb
  dl="$scratch/download"
  mkdir -p "$dl"
  # apt drops privileges to _apt for the download; let it reach and write here.
  if id -u _apt > /dev/null 2>&1; then
    chmod o+x "$scratch"
    chown _apt "$dl"
  fi
  say "downloading $kernel_pkg $kernel_ver"
  (cd "$dl" && apt-get download -qq "$kernel_pkg=$kernel_ver")
  mv "$dl"/*.deb "$cache/"
  deb=$(find "$cache" -maxdepth 1 -name "${kernel_pkg}_*.deb" -print -quit)
fi
[ -n "$deb" ] || die "download of $kernel_pkg produced no .deb"
kdir="$scratch/kernel"
dpkg-deb -x "$deb" "$kdir"
kabi=${kernel_pkg#linux-image-}
kimage="$kdir/boot/vmlinuz-$kabi"
[ -f "$kimage" ] || die "$deb has no boot/vmlinuz-$kabi"
moddir=""
for d in "$kdir/lib/modules/$kabi" "$kdir/usr/lib/modules/$kabi"; do
  [ -d "$d" ] && moddir=$d
done
[ -n "$moddir" ] || die "$deb has no modules for $kabi"

# --- the initramfs tree --------------------------------------------------------
root="$scratch/root"
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc/ssl/certs,usr/lib/ssl,lib/zn-modules}
mkdir -p "$root"/{proc,sys,dev,tmp,run,root,zn,mnt/disk}
chmod 1777 "$root/tmp"
chmod 700 "$root/root"
# The kernel opens /dev/console for /init before anything is mounted.
mknod -m 600 "$root/dev/console" c 5 1

# busybox-static and a link per applet (never over curl).
cp "$busybox" "$root/bin/busybox"
applets=0
while read -r applet; do
  if [ -z "$applet" ] || [ "$applet" = linuxrc ]; then continue; fi
  [ -e "$root/$applet" ] || [ -L "$root/$applet" ] && continue
  mkdir -p "$(dirname "$root/$applet")"
  ln -s /bin/busybox "$root/$applet"
  applets=$((applets + 1))
done < <("$root/bin/busybox" --list-full)
[ -L "$root/bin/sh" ] || die "busybox has no sh applet"
applet_list=$("$busybox" --list)
for need in ip insmod mount umount poweroff env hostname; do
  grep -qx "$need" <<< "$applet_list" || die "busybox lacks the $need applet /init uses"
done

# The virtio modules as NN-name.ko, decompressed (busybox insmod wants plain
# .ko); a module built into this kernel is skipped.
find_module() {
  find "$moddir/kernel" \( -name "$1.ko" -o -name "$1.ko.xz" -o -name "$1.ko.zst" -o -name "$1.ko.gz" \) -print -quit
}
module_lines=()
loaded=()
n=0
for m in "${modules[@]}"; do
  path=$(find_module "$m")
  if [ -z "$path" ]; then
    grep -q "/$m\.ko$" "$moddir/modules.builtin" 2> /dev/null || die "module $m is neither in $deb nor built in"
    module_lines+=("  $m (built in)")
    loaded+=("$m")
    continue
  fi
  n=$((n + 1))
  dest="$root/lib/zn-modules/$(printf '%02d' "$n")-$m.ko"
  case $path in
    *.ko.xz) xz -dc "$path" > "$dest" ;;
    *.ko.zst) zstd -qdc "$path" > "$dest" ;;
    *.ko.gz) gzip -dc "$path" > "$dest" ;;
    *) cp "$path" "$dest" ;;
  esac
  # Every module its .modinfo "depends=" names must be loaded (or built in)
  # before it: the package ships no modules.dep (depmod makes it on install).
  deps=$(tr '\0' '\n' < "$dest" | sed -n 's/^depends=//p' | tr ',' ' ')
  for dep in $deps; do
    [[ " ${loaded[*]} " == *" $dep "* ]] || die "$m needs $dep, which is not loaded before it"
  done
  rel=${path#"$moddir/"}
  module_lines+=("  $(basename "$dest") <- $rel")
  loaded+=("$m")
done

# curl, its libraries at the paths ldd names, and the loader. /lib and /lib64
# are real directories here (no merged /usr), which the loader's default search
# path covers without an ld.so.cache.
cp "$curl_bin" "$root/usr/bin/curl"
for lib in "${curl_libs[@]}"; do
  install -D -m 755 "$(readlink -f "$lib")" "$root$lib"
done
# libcurl's default CA bundle (curl-config --ca) is
# /etc/ssl/certs/ca-certificates.crt, which /init writes from /zn/ca.pem;
# OpenSSL's own default paths lead there too.
ln -sfn /etc/ssl/certs "$root/usr/lib/ssl/certs"
ln -sfn /etc/ssl/certs/ca-certificates.crt "$root/usr/lib/ssl/cert.pem"

cat > "$root/etc/passwd" << 'EOF'
root:x:0:0:root:/root:/bin/sh
zn:x:1000:1000:the workload (commands run as zn unless they name a uid):/home/zn:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat > "$root/etc/group" << 'EOF'
root:x:0:
zn:x:1000:
nogroup:x:65534:
EOF
cat > "$root/etc/hosts" << 'EOF'
127.0.0.1 localhost
::1 localhost ip6-localhost ip6-loopback
EOF
echo "hosts: files dns" > "$root/etc/nsswitch.conf"
: > "$root/etc/resolv.conf"
install -m 755 "$init_src" "$root/init"

# --- pack ----------------------------------------------------------------------
# One mtime for every entry, so the same inputs give the same bytes.
find "$root" -exec touch -h -d @0 {} +
tmp_initramfs="$out_dir/.initramfs.cpio.gz.tmp"
(cd "$root" && find . -print0 | LC_ALL=C sort -z |
  cpio --null --create --format=newc --owner=0:0 --reproducible --quiet) |
  gzip -9n > "$tmp_initramfs"
# The host appends an uncompressed per-VM cpio; the kernel reads one only at a
# 4-byte aligned offset and skips zero bytes between archives.
size=$(stat -c %s "$tmp_initramfs")
pad=$(((4 - size % 4) % 4))
[ "$pad" -eq 0 ] || head -c "$pad" /dev/zero >> "$tmp_initramfs"
cp "$kimage" "$out_dir/.vmlinuz.tmp"

{
  echo "# zeroness microVM guest, built by scripts/build-guest.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "$kernel_line"
  echo "kernel-release: $kabi"
  echo "vmlinuz-sha256: $(sha256sum < "$out_dir/.vmlinuz.tmp" | cut -d' ' -f1)"
  echo "initramfs-sha256: $(sha256sum < "$tmp_initramfs" | cut -d' ' -f1)"
  echo "initramfs-bytes: $(stat -c %s "$tmp_initramfs") (gzip, zero-padded to a multiple of 4)"
  echo "init-sha256: $(sha256sum < "$init_src" | cut -d' ' -f1)"
  echo "busybox: $(dpkg-query -W -f='${Package} ${Version}' busybox-static) $busybox, $applets applet links"
  echo "curl: $(dpkg-query -W -f='${Package} ${Version}' curl) $curl_bin"
  echo "modules (insmod order):"
  printf '%s\n' "${module_lines[@]}"
  echo "libraries (ldd $curl_bin):"
  for lib in "${curl_libs[@]}"; do
    # dpkg may have registered the path ldd names or the one it resolves to.
    owner=$(dpkg-query -S "$lib" "$(readlink -f "$lib")" 2> /dev/null | sed -n '1s/:.*//p' || true)
    echo "  $lib${owner:+ ($owner)}"
  done
  echo "files (besides the busybox applet links):"
  (cd "$root" && find . -mindepth 1 ! -lname /bin/busybox | LC_ALL=C sort | sed 's|^\.|  |')
} > "$out_dir/.manifest.txt.tmp"

mv "$out_dir/.vmlinuz.tmp" "$vmlinuz"
mv "$tmp_initramfs" "$initramfs"
mv "$out_dir/.manifest.txt.tmp" "$manifest"
say "$vmlinuz ($kabi), $initramfs ($(stat -c %s "$initramfs") bytes), $manifest"
