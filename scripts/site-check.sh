#!/bin/sh
# SPDX-License-Identifier: MIT
# The evidence site in headless Chromium (docs/campaign.md): the site of the committed
# records rendered into a scratch folder (BUILD/site-check), checked against the records,
# then every page opened by tests/site/site-check.mjs; then the same with hostile records
# added (tests/site/forge.mjs: every string a page shows set to an attack) in a second
# scratch folder (BUILD/site-check/hostile), where no script may run and no link leave. Installs what it needs when missing
# (Debian's chromium, libxml2-utils, nodejs and npm; puppeteer-core by npm ci, pinned in
# tests/site/package-lock.json). As root Chromium runs without its own sandbox.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}

missing=""
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v xmllint >/dev/null 2>&1 || missing="$missing libxml2-utils"
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
if [ -n "$missing" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "site-check: missing packages:$missing (install them as root)" >&2
        exit 1
    fi
    echo "site-check: installing$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
(
    cd tests/site
    want=$(sha256sum package-lock.json | cut -d' ' -f1)
    if [ "$(cat node_modules/.pybox-lock 2>/dev/null || true)" != "$want" ]; then
        echo "site-check: installing puppeteer-core (npm ci)" >&2
        npm ci --no-audit --no-fund --loglevel=error
        echo "$want" >node_modules/.pybox-lock
    fi
)

out=$build/site-check
rm -rf "$out"
mkdir -p "$out/evidence"
cp -R evidence/records "$out/evidence/records"
"$build/pybox-campaign" pages "$out/evidence" campaign/limits.md
"$build/pybox-campaign" check "$out/evidence" campaign/limits.md
PYBOX_BIN="$PWD/$build/pybox" node tests/site/site-check.mjs "$out/evidence" "$out"

hostile=$out/hostile
mkdir -p "$hostile/evidence"
cp -R evidence/records "$hostile/evidence/records"
node tests/site/forge.mjs "$hostile/evidence/records"
"$build/pybox-campaign" pages "$hostile/evidence" campaign/limits.md
"$build/pybox-campaign" check "$hostile/evidence" campaign/limits.md
PYBOX_BIN="$PWD/$build/pybox" node tests/site/site-check.mjs "$hostile/evidence" "$hostile"
