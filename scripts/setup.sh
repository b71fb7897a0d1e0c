#!/bin/sh
# SPDX-License-Identifier: MIT
# Set PyBox up from nothing on Debian 12 (as root): packages, the build, the pinned images
# for each backend named (default: the default backend, native) and the installation's
# receipt key; the container engine only when the docker backend is named. Images: the
# stdlib and data images, or only those --images names (make demo: what the default
# needs, stdlib). Idempotent: a second run only checks, and is quick.
#   scripts/setup.sh [--images "stdlib data"] [docker] [native]
set -eu
cd "$(dirname "$0")/.."

images="stdlib data"
if [ "${1:-}" = --images ]; then
    images=${2:?setup: --images needs a list of image names}
    shift 2
fi
backends="$*"
[ -n "$backends" ] || backends=$(sed -n 's/^#define PYBOX_DEFAULT_BACKEND "\(.*\)"$/\1/p' pybox/box.h)
for b in $backends; do
    case "$b" in
    docker | native) ;;
    *)
        echo "setup: unknown backend '$b' (docker, native)" >&2
        exit 2
        ;;
    esac
done

packages="gcc make libc6-dev pkg-config check libcjson-dev libjansson-dev libcurl4-openssl-dev libssl-dev
libarchive-dev libseccomp-dev libcap-dev libsystemd-dev libmicrohttpd-dev unicode-data libxml2-utils mmdebstrap curl ca-certificates"
case " $backends " in *" docker "*) packages="$packages docker.io" ;; esac
missing=""
for p in $packages; do
    if ! dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing="$missing $p"
    fi
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "setup: missing packages:$missing (install them as root, or run this as root)" >&2
        exit 1
    fi
    echo "setup: installing$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # The tests run nginx with a configuration of their own, on loopback: Debian's nginx
    # service (the default site, on port 80 of every address) is never started.
    case " $missing " in *" nginx-light "*)
        if [ ! -e /usr/sbin/policy-rc.d ]; then
            printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
            chmod 755 /usr/sbin/policy-rc.d
            apt-get install -y -qq --no-install-recommends nginx-light >/dev/null
            rm -f /usr/sbin/policy-rc.d
        fi
        if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
            systemctl disable --now nginx >/dev/null 2>&1 || :
        fi
        ;;
    esac
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

case " $backends " in *" docker "*) scripts/engine-start.sh ;; esac
make -s all
for b in $backends; do
    for image in $images; do
        build/pybox image build "$image" --backend "$b"
    done
done
build/pybox key --init >/dev/null
