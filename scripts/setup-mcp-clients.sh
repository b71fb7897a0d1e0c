#!/bin/sh
# SPDX-License-Identifier: MIT
# Install the MCP clients the tests drive pybox mcp with (the official TypeScript SDK
# client and the MCP Inspector) and the RFC 8785 canonicaliser PyBox's own is checked
# against (canonicalize), pinned in tests/mcp/package-lock.json: Node.js and npm
# from Debian's packages when missing, then `npm ci`. Quick when already done.
set -eu
cd "$(dirname "$0")/../tests/mcp"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
        echo "setup: Node.js and npm are missing (install nodejs and npm as root)" >&2
        exit 1
    fi
    echo "setup: installing nodejs npm" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 18 ]; then
    echo "setup: Node.js 18 or later is needed for the MCP client tests (found $(node --version))" >&2
    exit 1
fi

# npm ci again only when the lock file changed since the last install.
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat node_modules/.pybox-lock 2>/dev/null || true)" != "$want" ]; then
    echo "setup: installing the MCP clients (npm ci)" >&2
    npm ci --no-audit --no-fund --loglevel=error
    echo "$want" >node_modules/.pybox-lock
fi
