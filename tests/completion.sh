#!/bin/bash
# SPDX-License-Identifier: MIT
# The bash completion (completion/pybox.bash) against a real pybox: commands, every
# option of each command, option values, image names from a private installation.
#   tests/completion.sh PYBOX_BINARY
set -eu
bin=$(realpath "$1")
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=completion/pybox.bash disable=SC1091
. "$here/completion/pybox.bash"

# A private installation with one pinned image of its own name, so the names offered are
# this test's (nothing else is read or written).
home=$(mktemp -d /tmp/pybox-completion-XXXXXX)
trap 'rm -rf "$home"' EXIT
chmod 700 "$home"
echo 0123456789abcdef0123456789abcdef >"$home/install-id"
zeros=0000000000000000000000000000000000000000000000000000000000000000
printf '{"mine-1": {"id": "sha256:%s", "recipe_sha256": "%s", "built_at": "2026-12-01T00:00:00.000Z", "size": 1, "guest_protocol": 3, "custom": true}}\n' \
    "$zeros" "$zeros" >"$home/images.json"
export PYBOX_HOME=$home

failed=0
# complete WORDS...: COMPREPLY for the last word (may be empty), one per line
complete_line() {
    COMP_WORDS=("$bin" "$@")
    COMP_CWORD=$(($# ))
    COMPREPLY=()
    _pybox
    printf '%s\n' "${COMPREPLY[@]}"
}
# offers "WORDS" WANT...: every WANT is among the completions
offers() {
    local line=$1 got w
    shift
    # shellcheck disable=SC2086
    got=$(complete_line $line "${CUR-}")
    for w in "$@"; do
        if ! grep -qx -- "$w" <<<"$got"; then
            echo "FAIL: 'pybox $line ${CUR-}<TAB>' does not offer $w (offers: $(tr "\n" " " <<<"$got"))" >&2
            failed=1
        fi
    done
}
# only "WORDS" WANT...: the completions are exactly these
only() {
    local line=$1 got want
    shift
    # shellcheck disable=SC2086
    got=$(complete_line $line "${CUR-}" | sort | tr '\n' ' ')
    want=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
    if [ "$got" != "$want" ]; then
        echo "FAIL: 'pybox $line ${CUR-}<TAB>' offers '$got', not '$want'" >&2
        failed=1
    fi
}

CUR='' only "" exec mcp image session cleanup chart verify key help version
CUR=e only "" exec
# every option of each command's parser is in its help (a unit test holds that), and
# the completion offers what the help names
CUR=-- offers exec --timeout --memory --pids --cpus --image --input --output --backend --json --chart --color --session --help
CUR=--ch only exec --chart
CUR=-- only chart --help
CUR=-- offers mcp --images --max-timeout --max-memory --files-root --output-root --backend --help --listen \
    --listen-public --token-file --socket-group --allow-origins --max-connections --max-http-sessions --max-calls \
    --session-idle
CUR='' only "mcp --listen"
CUR=-- offers cleanup --dry-run --json --backend --help
CUR=-- only verify --key --help
CUR=-- only key --init --help
CUR=--co only exec --color
CUR='' only "exec --color" auto always never
CUR='' only "exec --color =" auto always never
CUR=al only "exec --json --color" always
CUR='' only "exec --image" mine-1
CUR='' only "exec --backend" docker native
CUR='' only "image" build list verify rm --help
CUR='' offers "image build" stdlib data mine-1
CUR='' only "image rm" mine-1
CUR=-- offers "image build mine-1" --force --lock --wheels --debian --backend
CUR=-- only "image list" --backend
CUR='' only "help" exec mcp image session cleanup chart verify key
CUR='' only "session" open close list --help
CUR=-- offers "session open" --image --timeout --memory --pids --cpus --backend --ttl --json --color --help
# file and folder values come from the file system
mkdir "$home/dir-x"
: >"$home/file-y"
CUR=$home/dir- only "exec --output" "$home/dir-x"
CUR=$home/file- only "exec --input" "$home/file-y"
CUR=$home/file- only "verify" "$home/file-y"
CUR=$home/file- only "verify --key" "$home/file-y"
CUR=$home/file- only "mcp --token-file" "$home/file-y"
CUR=roo offers "mcp --socket-group" root

if [ "$failed" != 0 ]; then
    exit 1
fi
echo "completion: every check passed"
