# SPDX-License-Identifier: MIT
# Bash completion for pybox: commands, each command's options (read from the installed
# pybox's own help, so they are always that pybox's), option values, and image names
# from `pybox image list`.

# The options a command's help lists, one at the start of each of its lines ("  --name").
_pybox_options()
{
    "$1" help "$2" 2>/dev/null | sed -n 's/^  *\(--[a-z][a-z-]*\).*/\1/p' | sort -u
}

# The names of this installation's pinned images (every backend's).
_pybox_images()
{
    "$1" image list 2>/dev/null | awk 'NR > 1 && $1 != "" { print $1 }' | sort -u
}

# The backends this pybox knows, from its help ("known: docker, native;").
_pybox_backends()
{
    "$1" help 2>/dev/null | sed -n 's/.*(known: \([^;)]*\)[;)].*/\1/p' | tr -d ','
}

_pybox()
{
    local cur=${COMP_WORDS[COMP_CWORD]}
    local prev=
    [ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD - 1]}
    # --name=value: bash splits at the '=' (COMP_WORDBREAKS)
    if [ "$cur" = "=" ]; then
        cur=
    elif [ "$prev" = "=" ] && [ "$COMP_CWORD" -gt 1 ]; then
        prev=${COMP_WORDS[COMP_CWORD - 2]}
    fi
    local bin=${COMP_WORDS[0]}
    command -v "$bin" >/dev/null 2>&1 || bin=pybox
    COMPREPLY=()

    if [ "$COMP_CWORD" -eq 1 ]; then
        mapfile -t COMPREPLY < <(compgen -W "exec mcp image session cleanup chart verify key help version" -- "$cur")
        return 0
    fi
    local cmd=${COMP_WORDS[1]} sub=${COMP_WORDS[2]:-}

    # the value of the option before the cursor
    case $prev in
    --image)
        mapfile -t COMPREPLY < <(compgen -W "$(_pybox_images "$bin")" -- "$cur")
        return 0
        ;;
    --backend)
        mapfile -t COMPREPLY < <(compgen -W "$(_pybox_backends "$bin")" -- "$cur")
        return 0
        ;;
    --color)
        mapfile -t COMPREPLY < <(compgen -W "auto always never" -- "$cur")
        return 0
        ;;
    --input | --lock | --key | --chart | --token-file)
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        compopt -o filenames 2>/dev/null || :
        return 0
        ;;
    --output | --wheels | --files-root | --output-root)
        mapfile -t COMPREPLY < <(compgen -d -- "$cur")
        compopt -o filenames 2>/dev/null || :
        return 0
        ;;
    --session)
        # the ids of this installation's sessions
        mapfile -t COMPREPLY < <(compgen -W "$("$bin" session list 2>/dev/null | awk 'NR > 1 { print $1 }')" -- "$cur")
        return 0
        ;;
    --socket-group)
        mapfile -t COMPREPLY < <(compgen -g -- "$cur")
        return 0
        ;;
    --timeout | --ttl | --idle | --memory | --pids | --cpus | --max-timeout | --max-memory | --output-root-max | --output-root-age | \
        --images | --debian | --listen | --allow-origins | --max-connections | --max-http-sessions | --max-calls | \
        --python-sessions-per-token | \
        --session-idle)
        return 0 # a value of the caller's own
        ;;
    esac

    case $cmd in
    help)
        [ "$COMP_CWORD" -eq 2 ] && mapfile -t COMPREPLY < <(compgen -W "exec mcp image session cleanup chart verify key" -- "$cur")
        ;;
    exec | mcp | cleanup | key)
        mapfile -t COMPREPLY < <(compgen -W "$(_pybox_options "$bin" "$cmd")" -- "$cur")
        ;;
    chart)
        # --help, else the receipt: a file
        if [ "${cur#-}" != "$cur" ]; then
            mapfile -t COMPREPLY < <(compgen -W "--help" -- "$cur")
        else
            mapfile -t COMPREPLY < <(compgen -f -- "$cur")
            compopt -o filenames 2>/dev/null || :
        fi
        ;;
    verify)
        # its options, else the receipt: a file
        if [ "${cur#-}" != "$cur" ]; then
            mapfile -t COMPREPLY < <(compgen -W "$(_pybox_options "$bin" verify)" -- "$cur")
        else
            mapfile -t COMPREPLY < <(compgen -f -- "$cur")
            compopt -o filenames 2>/dev/null || :
        fi
        ;;
    session)
        if [ "$COMP_CWORD" -eq 2 ]; then
            mapfile -t COMPREPLY < <(compgen -W "open close list --help" -- "$cur")
        elif [ "$COMP_CWORD" -eq 3 ] && [ "$sub" = close ] && [ "${cur#-}" = "$cur" ]; then
            mapfile -t COMPREPLY < <(compgen -W "$("$bin" session list 2>/dev/null | awk 'NR > 1 { print $1 }')" -- "$cur")
        else
            mapfile -t COMPREPLY < <(compgen -W "$(_pybox_options "$bin" session)" -- "$cur")
        fi
        ;;
    image)
        if [ "$COMP_CWORD" -eq 2 ]; then
            mapfile -t COMPREPLY < <(compgen -W "build list verify rm --help" -- "$cur")
        elif [ "$COMP_CWORD" -eq 3 ] && [ "$sub" = build ] && [ "${cur#-}" = "$cur" ]; then
            mapfile -t COMPREPLY < <(compgen -W "stdlib data $(_pybox_images "$bin")" -- "$cur")
        elif [ "$COMP_CWORD" -eq 3 ] && [ "$sub" = rm ] && [ "${cur#-}" = "$cur" ]; then
            mapfile -t COMPREPLY < <(compgen -W "$(_pybox_images "$bin")" -- "$cur")
        elif [ "$sub" = build ]; then
            mapfile -t COMPREPLY < <(compgen -W "$(_pybox_options "$bin" image)" -- "$cur")
        else
            mapfile -t COMPREPLY < <(compgen -W "--backend" -- "$cur")
        fi
        ;;
    esac
    return 0
}

complete -F _pybox pybox
