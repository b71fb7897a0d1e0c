#!/bin/sh
# SPDX-License-Identifier: MIT
# The source rules the compiler does not enforce, on PyBox's own C (pybox/, guest/,
# campaign/): calls that are banned, paths formatted without a check, reads without a
# bound, a library that prints. Prints each breach as "file:line: rule: the line" and
# exits 1 if there is one.
set -eu
cd "$(dirname "$0")/.."

hits=$(mktemp)
trap 'rm -f "$hits"' EXIT INT TERM
rule() { # rule text, then grep -n lines on stdin
    while IFS= read -r hit; do
        printf '%s: %s\n' "$1" "$hit" >>"$hits"
    done
}
calls() { # a regular expression of call names, a file: where they are called (not in comments)
    pattern=$1
    shift
    grep -nE "(^|[^_a-zA-Z0-9])($pattern)[[:space:]]*\(" "$@" 2>/dev/null | grep -vE '^[0-9]+:[[:space:]]*(/\*|\*)' || true
}

all=$(git ls-files 'pybox/*.[ch]' 'guest/*.[ch]' 'campaign/*.[ch]' 2>/dev/null || find pybox guest campaign -name '*.[ch]')
product=$(echo "$all" | grep -vE '^campaign/')
threaded=$(echo "$all" | grep -vE '^guest/')
library=$(echo "$all" | grep -E '^pybox/' | grep -vE '^pybox/(cli|mcp)/|^pybox/log\.c$')

# Unbounded or locale-bound calls: never.
# shellcheck disable=SC2086
for f in $all; do
    calls 'sprintf|vsprintf|strcpy|strcat|gets|atoi|atol|atoll|strtok|tmpnam|tempnam|mktemp|alloca|getwd' "$f" |
        sed "s|^|$f:|" | rule "banned call (use the bounded forms of util.h and buf.h)"
done
# Wrong in code that runs in threads (the core runs in threads under pybox mcp, the
# campaign runs two boxes at once); the guest init is one thread.
# shellcheck disable=SC2086
for f in $threaded; do
    calls 'sscanf|access|strerror|getpwuid|getgrgid|localtime|gmtime|readdir_r|getenv_r' "$f" | sed "s|^|$f:|" |
        rule "not for threaded code (strtol, faccessat or stat, pybox_strerror, the _r forms)"
done
# A path or request path made with snprintf is cut without a word; pybox_fmt refuses.
# shellcheck disable=SC2086
for f in $product; do
    grep -nE "[^v]snprintf\([a-z_]*(path|dir)[a-z_]*[,)[]" "$f" | sed "s|^|$f:|" |
        rule "a path made with snprintf (pybox_fmt refuses a path it would cut)" || true
done
# Reading without a bound.
# shellcheck disable=SC2086
for f in $all; do
    calls 'getline|getdelim' "$f" | sed "s|^|$f:|" | rule "a read without a bound (pybox_read_bounded, fgets)"
done
# The test hooks are listed in one place, pybox/hooks.c, and read through pybox_hook():
# a hook read anywhere else would be in the installed build too.
# shellcheck disable=SC2086
for f in $(echo "$all" | grep -vx 'pybox/hooks.c'); do
    grep -nE '"PYBOX_TEST_' "$f" | grep -vE '^[0-9]+:[[:space:]]*(/\*|\*)' | sed "s|^|$f:|" |
        rule "a test hook outside pybox/hooks.c (add it to the list there, read it with pybox_hook)" || true
done
# The library never prints: no stdout or stderr in the core, the backends or images.
# shellcheck disable=SC2086
for f in $library; do
    { calls 'printf|fprintf|puts|fputs|fputc|putchar|perror|fwrite' "$f"
      grep -nE '[(,][[:space:]]*std(out|err)[[:space:]]*[,)]' "$f" | grep -vE '^[0-9]+:[[:space:]]*(/\*|\*)' || true; } |
        sed "s|^|$f:|" | rule "the library prints (give it to the log handler, log.h)"
done

if [ -s "$hits" ]; then
    cat "$hits"
    echo "source check: $(wc -l <"$hits") breach(es)" >&2
    exit 1
fi
echo "source check: clean ($(echo "$all" | wc -l) files)"
