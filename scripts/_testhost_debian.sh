# Sourced by scripts/testhost: a test host on a Debian release's own root file system
# (`up CONTROLLER NAME --debian 13`), so the tests meet that release's Podman (5.x on
# Debian 13, with pasta) rather than this machine's.
#
# The root file system is built by mmdebstrap from Debian's package repository (the mirror
# images/rootfs.toml names; nothing else is fetched) and cached by its inputs' digest under
# /var/cache/writerpool-testhost. Each host mounts it read-only under an overlay whose
# upper layer, and the account's home (its container storage), persist under
# /var/lib/writerpool-testhost/NAME, as an account's home persists for the other kind.
# The host runs in a mount namespace of its own whose root is that tree (pivot_root), with
# /proc, /sys (this machine's cgroup mounts), /dev, a tmpfs /tmp and /run, and the state
# directory bound in; every process of the host enters it and the network namespace with
# `nsenter --mount --net`. Its /etc/passwd, /etc/subuid and /etc/subgid are its own.

debian_packages=(podman passt uidmap runc crun fuse-overlayfs slirp4netns openssh-server
                 python3 iproute2 conmon catatonit netavark aardvark-dns)
# Changing what the root file system holds changes this, and so the cache's name.
debian_recipe=2
debian_cache_root=/var/cache/writerpool-testhost
debian_lib_root=/var/lib/writerpool-testhost

debian_suite() {
    case "$1" in
        (13) echo trixie ;;
        (*) echo "testhost: --debian takes 13 (the release with Podman 5)" >&2; exit 2 ;;
    esac
}

debian_setup_names() {  # after setup_names: the paths and account of a Debian host
    release="$1"
    suite="$(debian_suite "$release")"
    lib="$debian_lib_root/$name"
    nsfile="$state/ns/mnt"
    # A uid and subordinate ranges no account of this machine has: its processes run on
    # this kernel beside the machine's own.
    local n; n=$(( $(printf '%s' "$name" | cksum | cut -d' ' -f1) ))
    ruid=$(( 20000 + n % 10000 ))
    sub_start=$(( 2000000000 + (n % 1000) * 65536 ))
    if getent passwd "$ruid" >/dev/null; then
        echo "testhost $name: uid $ruid is an account of this machine; choose another NAME" >&2
        exit 2
    fi
    sock="/run/user/$ruid/podman/podman.sock"
}

debian_mirror() {  # the writer image's mirror: one place names Debian's repository
    sed -n 's/^mirror = "\(.*\)"$/\1/p' "$here/../images/rootfs.toml" | sed 's:/*$::'
}

debian_build_argv() {  # debian_build_argv DIR: the mmdebstrap command for this release
    local packages; packages="$(printf '%s\n' "${debian_packages[@]}" | sort -u | paste -sd,)"
    printf '%s\n' mmdebstrap --mode=root --variant=minbase --format=directory \
        "--include=$packages" '--dpkgopt=path-exclude=/usr/share/man/*' \
        '--dpkgopt=path-exclude=/usr/share/doc/*' \
        '--dpkgopt=path-include=/usr/share/doc/*/copyright' -- "$suite" "$1" "$(debian_mirror)"
}

debian_configure_tree() {  # debian_configure_tree DIR: what the host's own /etc says
    local root="$1"
    # No systemd runs there: cgroups through the file system, events to a file, logs
    # in files. The OCI runtime depends on this machine's cgroups and is the account's.
    cat > "$root/etc/containers/containers.conf" <<'EOF'
[containers]
log_driver = "k8s-file"

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
    echo "# no DNS: this host's only network is a veth pair" > "$root/etc/resolv.conf"
    echo "writerpool-testhost" > "$root/etc/hostname"
    install -d -m 0755 "$root/run/sshd"
    rm -f "$root"/etc/ssh/ssh_host_*  # each host gets its own key in its state
}

debian_rootfs() {  # build (or find cached) this release's tree; sets rootfs and digest
    local argv; mapfile -t argv < <(debian_build_argv DIR)
    digest="$({ printf '%s\n' "recipe=$debian_recipe" "${argv[@]}"; declare -f debian_configure_tree; } \
        | sha256sum | cut -c1-16)"
    rootfs="$debian_cache_root/debian$release-$digest"
    [ -f "$rootfs/.writerpool-complete" ] && return 0
    install -d -m 0700 "$debian_cache_root"
    local partial="$rootfs.partial"
    rm -rf "$partial"
    mapfile -t argv < <(debian_build_argv "$partial")
    echo "testhost $name: building the Debian $release root file system with mmdebstrap" >&2
    local started=$SECONDS
    if ! "${argv[@]}" >"$debian_cache_root/build.log" 2>&1; then
        tail -20 "$debian_cache_root/build.log" >&2
        rm -rf "$partial"
        echo "testhost $name: mmdebstrap failed (log: $debian_cache_root/build.log)" >&2
        exit 1
    fi
    debian_configure_tree "$partial"
    touch "$partial/.writerpool-complete"
    mv "$partial" "$rootfs"
    echo "testhost $name: built in $(( SECONDS - started )) s" >&2
}

debian_forget_old_trees() {  # keep the current tree and any a running host still mounts
    local tree keep
    for tree in "$debian_cache_root"/debian"$release"-*; do
        [ -d "$tree" ] && [ "$tree" != "$rootfs" ] || continue
        keep=no
        grep -qxF "$tree" /run/writerpool-testhost/*/rootfs 2>/dev/null && keep=yes
        [ "$keep" = yes ] || rm -rf "$tree"
    done
}

debian_persistent_up() {  # the overlay's upper layer and the home, reset on a new tree
    install -d -m 0700 "$debian_lib_root" "$lib"
    if [ "$(cat "$lib/rootfs" 2>/dev/null)" != "$rootfs" ]; then
        rm -rf "$lib/upper" "$lib/work"
        echo "$rootfs" > "$lib/rootfs"
    fi
    install -d -m 0755 "$lib/upper" "$lib/work" "$lib/root"
    install -d -m 0700 -o "$ruid" -g "$ruid" "$lib/home"
}

debian_namespace_script() {  # run by `unshare --mount`: the host's tree becomes its root
    cat <<EOF
set -eu
root='$lib/root'
mount -t overlay overlay -o 'lowerdir=$rootfs,upperdir=$lib/upper,workdir=$lib/work' "\$root"
grep -q '^$remote:' "\$root/etc/passwd" || {
    echo '$remote:x:$ruid:$ruid::/home/$remote:/bin/bash' >> "\$root/etc/passwd"
    echo '$remote:x:$ruid:' >> "\$root/etc/group"
    # sshd without PAM refuses a locked account; '*' is no password, not locked.
    echo '$remote:*:20000:0:99999:7:::' >> "\$root/etc/shadow"
    echo '$remote:$sub_start:65536' >> "\$root/etc/subuid"
    echo '$remote:$sub_start:65536' >> "\$root/etc/subgid"
}
mkdir -p "\$root/home/$remote"
mount --bind '$lib/home' "\$root/home/$remote"
mount -t proc proc "\$root/proc"
# This machine's /sys with its cgroup mounts: rootless Podman finds its hierarchy there.
mount --rbind /sys "\$root/sys"
mount --rbind /dev "\$root/dev"
mount -t tmpfs -o mode=1777 tmpfs "\$root/tmp"
mount -t tmpfs -o mode=0755 tmpfs "\$root/run"
install -d -m 0755 "\$root/run/sshd" "\$root/run/user" "\$root$state"
install -d -m 0700 -o $ruid -g $ruid "\$root/run/user/$ruid" "\$root/run/user/$ruid/podman"
mount --bind '$state' "\$root$state"
cd "\$root"
mkdir -p .host
pivot_root . .host
umount -l /.host
rmdir /.host
# As on a host booted by systemd: rootless Podman warns of missing mounts otherwise.
mount --make-rshared /
EOF
}

debian_stop_if_stale() {  # a host still running on an older tree stops before its reset
    if [ -f "$state/rootfs" ] && [ "$(cat "$state/rootfs")" != "$rootfs" ]; then
        echo "testhost $name: its root file system changed; restarting it" >&2
        debian_down
    fi
}

debian_namespace_up() {
    install -d -m 0700 "$state" "$state/ns"
    mountpoint -q "$nsfile" && return 0
    # The file that keeps the namespace must sit on a mount that is not shared, else the
    # namespace would hold a copy of its own anchor.
    mountpoint -q "$state/ns" || { mount --bind "$state/ns" "$state/ns"; mount --make-private "$state/ns"; }
    touch "$nsfile"
    unshare --mount="$nsfile" --propagation private sh -c "$(debian_namespace_script)"
    echo "$rootfs" > "$state/rootfs"
}

in_root() {  # in the Debian host: its mount namespace (root and cwd its /) and network
    nsenter --mount="$nsfile" --net="/run/netns/$ns" "$@"
}

debian_account_up() {  # the account's own Podman settings, in its persistent home
    local conf="$lib/home/.config/containers" runtime=''
    # crun fails on hybrid cgroups (v1 controllers and a v2 mount); runc works there.
    [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] || runtime='runtime = "runc"'
    install -d -m 0700 -o "$ruid" -g "$ruid" "$lib/home/.config" "$conf"
    printf '[engine]\n%s\n' "$runtime" > "$conf/containers.conf"
    printf '[storage]\ndriver = "overlay"\n' > "$conf/storage.conf"
    chown "$ruid:$ruid" "$conf/containers.conf" "$conf/storage.conf"
}

debian_sshd_up() {
    write_sshd_config
    if [ ! -f "$state/sshd.pid" ] || ! kill -0 "$(cat "$state/sshd.pid")" 2>/dev/null; then
        in_root /usr/sbin/sshd -f "$state/sshd_config"
    fi
}

debian_as_remote() {  # a command as the host's account, in the host, with its login env
    in_root runuser -u "$remote" -- env -i PATH=/usr/local/bin:/usr/bin:/bin \
        HOME="/home/$remote" USER="$remote" LOGNAME="$remote" \
        XDG_RUNTIME_DIR="/run/user/$ruid" LANG=C.UTF-8 "$@"
}

debian_service_running() {
    in_root test -S "$sock" && pgrep -u "$ruid" -f "podman system service" >/dev/null
}

debian_podman_service_up() {
    debian_service_running && return 0
    (debian_as_remote setsid podman system service --time=0 "unix://$sock") \
        </dev/null >"$state/service.log" 2>&1 &
    for _ in $(seq 150); do
        debian_service_running && return 0
        sleep 0.1
    done
    echo "testhost $name: Podman's API service did not start:" >&2
    cat "$state/service.log" >&2
    exit 1
}

debian_tools() {  # what builds the tree; scripts/bootstrap-host installs mmdebstrap too
    local missing=()
    for p in mmdebstrap debian-archive-keyring util-linux; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        apt-get update -q
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
    fi
}

debian_up() {
    debian_tools
    debian_rootfs
    debian_stop_if_stale
    debian_persistent_up
    network_up
    debian_namespace_up
    debian_account_up
    debian_sshd_up
    debian_podman_service_up
    debian_forget_old_trees
}

debian_down() {
    [ -f "$state/sshd.pid" ] && kill "$(cat "$state/sshd.pid")" 2>/dev/null || true
    pkill -u "$ruid" 2>/dev/null || true
    for _ in $(seq 50); do pgrep -u "$ruid" >/dev/null || break; sleep 0.1; done
    if mountpoint -q "$nsfile" 2>/dev/null; then umount "$nsfile"; fi
    if mountpoint -q "$state/ns" 2>/dev/null; then umount "$state/ns"; fi
    rm -f "$state/rootfs" "$state/sshd.pid"
}
