#!/bin/sh
# SPDX-License-Identifier: MIT
# make install and make uninstall: PyBox under a prefix, and exactly that taken away.
#   scripts/install.sh install BUILD_DIR DESTDIR PREFIX
#   scripts/install.sh uninstall DESTDIR PREFIX
# Under DESTDIR/PREFIX: bin/pybox, libexec/pybox/pybox-init, share/pybox/images/ (the
# built-in recipes), share/man/man1 and man5 (the man pages),
# share/bash-completion/completions/pybox and lib/systemd/system/pybox-mcp.service (the
# service of pybox mcp --listen, naming PREFIX/bin/pybox: it is not enabled). Each path it puts there is listed, relative to
# the prefix, in share/pybox/installed-files, and so is each folder it had to make
# (ending in "/"), DESTDIR/PREFIX itself and the folders above it included ("./" for
# DESTDIR/PREFIX, "../" for the one above, ...); uninstall removes the files listed there
# and the list, then each listed folder once empty, the deepest first: nothing else,
# never a state folder. An install over an older one first takes the older away, so
# nothing it no longer installs is left behind.
set -eu
cd "$(dirname "$0")/.."

manifest=share/pybox/installed-files

usage() {
    echo "usage: scripts/install.sh install BUILD_DIR DESTDIR PREFIX | uninstall DESTDIR PREFIX" >&2
    exit 2
}

# The root everything goes under: DESTDIR and PREFIX, which must be absolute and hold no
# "." or ".." (the folders above the root are counted by name).
root_of() {
    case $2 in
    /*) ;;
    *)
        echo "install: PREFIX must be an absolute path (not '$2')" >&2
        exit 2
        ;;
    esac
    case $1 in
    '' | /*) ;;
    *)
        echo "install: DESTDIR must be empty or an absolute path (not '$1')" >&2
        exit 2
        ;;
    esac
    case $1$2/ in
    */./* | */../*)
        echo "install: DESTDIR and PREFIX must not hold . or .. (not '$1$2')" >&2
        exit 2
        ;;
    esac
    printf '%s%s' "$1" "$2"
}

# A listed folder that is the root or one above it ("./", "../", "../../", ...).
is_up() {
    case $1 in
    ./) return 0 ;;
    ../*) [ -z "$(printf '%s' "$1" | sed 's|\.\./||g')" ] ;;
    *) return 1 ;;
    esac
}

# The path of such a folder: the root, then one folder up for each "../".
up_path() { # root rel
    path=$1
    rel=$2
    while [ "$rel" != ./ ] && [ -n "$rel" ]; do
        path=$(dirname "$path")
        rel=${rel#../}
    done
    printf '%s' "$path"
}

# Only PyBox's own files may be in the list, and folders under the prefix: anything else
# (a list edited by hand) stops uninstall before anything is removed.
own_path() {
    is_up "$1" && return 0 # only ever removed when empty
    case $1 in
    */../* | ../* | */.. | /* | ..) return 1 ;;
    */) return 0 ;; # a folder: only ever removed when empty
    bin/pybox | libexec/pybox/* | share/pybox/* | share/bash-completion/completions/pybox) return 0 ;;
    share/man/man1/pybox.1 | share/man/man1/pybox-*.1 | share/man/man5/pybox-*.5) return 0 ;;
    lib/systemd/system/pybox-mcp.service) return 0 ;;
    esac
    return 1
}

remove_listed() { # root: remove what its list names, the list, then its folders once empty
    root=$1
    while IFS= read -r rel; do
        [ -n "$rel" ] || continue
        own_path "$rel" || {
            echo "uninstall: $root/$manifest names '$rel', which is not PyBox's: nothing removed" >&2
            exit 1
        }
    done <"$root/$manifest"
    # a folder sorts after its parent: reversed, the deepest come first; then the root
    # and the folders above it, nearest first
    dirs=$(grep '/$' "$root/$manifest" | grep -vE '^(\./|(\.\./)+)$' | LC_ALL=C sort -r || true)
    ups=$(grep -E '^(\./|(\.\./)+)$' "$root/$manifest" | awk '{ print length($0), $0 }' | sort -n | cut -d' ' -f2- || true)
    while IFS= read -r rel; do
        case $rel in
        '' | */) ;;
        *) rm -f "$root/$rel" ;;
        esac
    done <"$root/$manifest"
    rm -f "$root/$manifest"
    echo "$dirs" | while IFS= read -r rel; do
        [ -z "$rel" ] || rmdir "$root/$rel" 2>/dev/null || true
    done
    echo "$ups" | while IFS= read -r rel; do
        [ -z "$rel" ] || rmdir "$(up_path "$root" "$rel")" 2>/dev/null || true
    done
}

case ${1:-} in
install)
    [ $# -eq 4 ] || usage
    build=$2
    root=$(root_of "$3" "$4")
    for f in "$build/pybox" "$build/pybox-init"; do
        [ -f "$f" ] || {
            echo "install: $f is not built (make)" >&2
            exit 1
        }
    done
    [ -f "$root/$manifest" ] && remove_listed "$root"
    list=$(mktemp)
    trap 'rm -f "$list"' EXIT INT TERM
    # the root: each folder of its path that is not there made and listed, by how far
    # above the root it is
    depth=$(printf '%s' "$root" | tr -s / '\n' | grep -c .)
    path=
    i=0
    old_ifs=$IFS
    IFS=/
    set -f
    for part in $root; do
        IFS=$old_ifs
        [ -n "$part" ] || continue
        i=$((i + 1))
        path=$path/$part
        if [ ! -d "$path" ]; then
            mkdir -m 0755 "$path"
            rel=./
            [ "$i" -eq "$depth" ] || rel=$(printf '../%.0s' $(seq $((depth - i))))
            echo "$rel" >>"$list"
        fi
    done
    set +f
    IFS=$old_ifs
    mkdirs() { # a folder under the prefix: each part that is not there made and listed
        path=
        old_ifs=$IFS
        IFS=/
        for part in $1; do
            IFS=$old_ifs
            path=${path:+$path/}$part
            if [ ! -d "$root/$path" ]; then
                mkdir -m 0755 "$root/$path"
                echo "$path/" >>"$list"
            fi
        done
        IFS=$old_ifs
    }
    put() { # mode source destination (relative to the prefix)
        mkdirs "$(dirname "$3")"
        install -m "$1" "$2" "$root/$3"
        echo "$3" >>"$list"
    }
    put 0755 "$build/pybox" bin/pybox
    put 0755 "$build/pybox-init" libexec/pybox/pybox-init
    put 0755 images/build-rootfs.sh share/pybox/images/build-rootfs.sh
    # every recipe folder whole (a recipe's fingerprint covers all of it)
    find images -mindepth 2 -type f | LC_ALL=C sort | while IFS= read -r f; do
        put 0644 "$f" "share/pybox/$f"
    done
    for page in man/*.1 man/*.5; do
        section=${page##*.}
        put 0644 "$page" "share/man/man$section/${page#man/}"
    done
    put 0644 completion/pybox.bash share/bash-completion/completions/pybox
    # the service names the installed pybox by its path under the prefix (DESTDIR is
    # where the files are made, not where they run)
    unit=$(mktemp)
    sed "s|@bindir@|$4/bin|g" systemd/pybox-mcp.service >"$unit"
    put 0644 "$unit" lib/systemd/system/pybox-mcp.service
    rm -f "$unit"
    install -m 0644 "$list" "$root/$manifest"
    echo "install: PyBox $(sed -n 's/^#define PYBOX_VERSION "\(.*\)"$/\1/p' pybox/version.h) in $root" \
        "($(grep -vc '/$' "$list") files, listed in $root/$manifest)"
    ;;
uninstall)
    [ $# -eq 3 ] || usage
    root=$(root_of "$2" "$3")
    [ -f "$root/$manifest" ] || {
        echo "uninstall: nothing of PyBox's is installed in $root (no $manifest)" >&2
        exit 1
    }
    n=$(grep -v '/$' "$root/$manifest" | grep -c . || true)
    remove_listed "$root"
    echo "uninstall: removed $n files of PyBox's from $root (state folders are kept)"
    ;;
*)
    usage
    ;;
esac
