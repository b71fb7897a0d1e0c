#!/bin/sh
# SPDX-License-Identifier: MIT
# The layering of PyBox's own C (pybox/, guest/, campaign/), as docs/box-interface.md
# writes it down: a file includes only its own folder's files and those of lower layers,
# and no two modules (a .c and its .h; a header of no .c belongs to those that include
# it) include each other, directly or around a circle.
# Prints each breach as "file:line: layers: ..." or "layers: include circle: a -> b -> a"
# and exits 1 if there is one.
set -eu
cd "$(dirname "$0")/.."

files=$(git ls-files 'pybox/*.[ch]' 'guest/*.[ch]' 'campaign/*.[ch]' 2>/dev/null ||
    find pybox guest campaign -name '*.[ch]')
# shellcheck disable=SC2086
grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' $files | awk '
# The layers, lowest first: a folder may include its own files and those of any lower
# layer; the core library and its images are one layer (the run flow uses images, images
# are built through the box interface).
BEGIN {
    rank["guest"] = 0          # the guest init and its protocol with the host
    rank["pybox"] = 1          # the core library: the box interface, the run flow, receipts
    rank["pybox/image"] = 1    # images, built and checked through the box interface
    rank["pybox/docker"] = 2   # a backend: implements pybox/box.h
    rank["pybox/native"] = 2   # a backend: implements pybox/box.h
    rank["pybox/mcp"] = 3      # the MCP front-end
    rank["pybox/cli"] = 4      # the command line (takes the MCP server'"'"'s options)
    rank["campaign"] = 5       # the evidence campaign and its tools, over all of PyBox
    # The headers of a backend are its own (and its tests): the rest of PyBox knows
    # backends through pybox/box.h and its registry, the campaign too.
    backend["pybox/docker"] = 1
    backend["pybox/native"] = 1
    bad = 0
}
function dir(p,   d) { d = p; sub(/\/[^\/]*$/, "", d); return d }
# a path with "./" and "x/../" taken out
function clean(p,   n, i, k, part, out, o) {
    n = split(p, part, "/"); o = 0
    for (i = 1; i <= n; i++) {
        if (part[i] == "." || part[i] == "") continue
        if (part[i] == ".." && o > 0 && out[o] != "..") { o--; continue }
        out[++o] = part[i]
    }
    p = ""
    for (k = 1; k <= o; k++) p = p (k > 1 ? "/" : "") out[k]
    return p
}
function module(p) { sub(/\.[ch]$/, "", p); return p }
{
    # file:line:#include "x"
    file = $0; sub(/:.*/, "", file)
    line = $0; sub(/^[^:]*:/, "", line); text = line; sub(/:.*/, "", line); sub(/^[^:]*:/, "", text)
    inc = text; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
    to = clean(dir(file) "/" inc)
    from_dir = dir(file); to_dir = dir(to)
    if (!(from_dir in rank) || !(to_dir in rank)) next
    if (from_dir != to_dir && rank[to_dir] > rank[from_dir] ||
        from_dir != to_dir && rank[to_dir] == rank[from_dir] && rank[to_dir] != 1) {
        printf "%s:%s: layers: %s/ includes %s (layer %d of %s/ is not below its own, %d)\n", file, line, from_dir,
            to, rank[to_dir], to_dir, rank[from_dir]
        bad++
    }
    if ((to_dir in backend) && from_dir != to_dir) {
        printf "%s:%s: layers: %s includes %s, a header of that backend alone (pybox/box.h is the interface of backends)\n",
            file, line, file, to
        bad++
    }
    a = module(file); b = module(to)
    if (file ~ /\.c$/) compiled[a] = 1
    if (a != b && !((a, b) in edge)) { edge[a, b] = 1; raw[a] = raw[a] " " b; node[a] = 1; node[b] = 1 }
}
# A header of no .c of its own (shared declarations) belongs to no module: what it
# includes counts for each module that includes it.
function through(m, from,   n, i, list) {
    n = split(raw[m], list, " ")
    for (i = 1; i <= n; i++) {
        if (list[i] == from || (from, list[i]) in seen) continue
        seen[from, list[i]] = 1
        if (list[i] in compiled) out[from] = out[from] " " list[i]
        else through(list[i], from)
    }
}
# a circle through the modules, by depth-first search: colour 1 on the path, 2 done
function visit(m,   n, i, next_m, list) {
    colour[m] = 1; path[++depth] = m
    n = split(out[m], list, " ")
    for (i = 1; i <= n; i++) {
        next_m = list[i]
        if (colour[next_m] == 1) { circle(next_m); continue }
        if (colour[next_m] == 0) visit(next_m)
    }
    colour[m] = 2; depth--
}
function circle(m,   i, k, s) {
    for (i = depth; i > 0 && path[i] != m; i--) ;
    s = ""
    for (k = i; k <= depth; k++) s = s path[k] " -> "
    print "layers: include circle: " s m
    bad++
}
END {
    for (m in compiled) through(m, m)
    depth = 0
    for (m in compiled) if (colour[m] == 0) visit(m)
    exit bad > 0 ? 1 : 0
}
' && { echo "layers check: clean"; exit 0; }
echo "layers check: breaches above (docs/box-interface.md, \"Layers\")" >&2
exit 1
