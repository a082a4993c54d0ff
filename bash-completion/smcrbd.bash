# SPDX-License-Identifier: BSD-3-Clause
# Bash completion for smcrd, smcrctl, smcr-attach and smcr-fuse, installed
# under each program's name.  The options come from the program's own
# --help (read once per program and shell), so they follow the program:
#  - option lines are those indented by 2 ("  -x, --name ARG") or 6
#    ("      --name=ARG", "--name[=ARG]") spaces, their text in the lines
#    indented deeper;
#  - an argument named FILE or PATH completes file names, DIR directory
#    names, BOOL true and false, a|b those words, and one whose text lists
#    words ("a, b (default) or c", after a colon if there is one) those;
#  - smcrctl's command words are the lines of its Commands section, and
#    a TARGET the program names "smcrctl [--dir DIR] list" shows.
# Bash's own compgen and compopt only: bash-completion's helpers are not
# needed (sourcing this file in a plain bash works).

# _smcrbd_specs[PROGRAM]: one line per option, "-x --name ARG VALUES..."
# ("-" when there is no short option, no ARG when it takes none; VALUES
# the words an argument completes to, or FILE or DIR).
# _smcrbd_cmds[PROGRAM]: the command words (smcrctl).
declare -gA _smcrbd_specs _smcrbd_cmds

# Sets _smcrbd_w to the words of a value list "a, b (default) or c"
# (without parentheses, the text after its last colon, up to a ";"):
# empty unless every item is one word.
_smcrbd_words()
{
    local t=$1 w out=
    _smcrbd_w=
    while [[ $t =~ ^(.*)\([^\)]*\)(.*)$ ]]; do
        t=${BASH_REMATCH[1]}${BASH_REMATCH[2]}
    done
    t=${t##*: }
    t=${t%%;*}
    t=${t//, / , }
    t=${t// or / , }
    local -a items
    IFS=',' read -r -a items <<<"$t"
    (( ${#items[@]} >= 2 )) || return 0
    for w in "${items[@]}"; do
        w=${w#"${w%%[! ]*}"}
        w=${w%"${w##*[! ]}"}
        [[ $w =~ ^[a-z][a-z0-9-]*$ ]] || return 0
        out+=" $w"
    done
    _smcrbd_w=${out# }
}

# Appends the spec lines of the option line held in pshort, phead and
# pdesc (of _smcrbd_load) to its spec, and forgets it.
_smcrbd_add()
{
    local short=$pshort head=$phead tok long arg vals _smcrbd_w
    local re_long='^(--[A-Za-z0-9][A-Za-z0-9-]*)(\[?[ =]([^ ]+))?$'
    while [[ -n $head ]]; do
        tok=${head%%, *}
        [[ $head == *', '* ]] && head=${head#*, } || head=
        if [[ $tok == -[A-Za-z0-9] ]]; then
            short=$tok
            continue
        fi
        [[ $tok =~ $re_long ]] || continue
        long=${BASH_REMATCH[1]}
        arg=${BASH_REMATCH[3]}
        arg=${arg%]}
        vals=
        case $arg in
        '') ;;
        *FILE*|*PATH*) vals=FILE ;;
        *DIR*) vals=DIR ;;
        BOOL) vals='true false' ;;
        *'|'*) vals=${arg//|/ } ;;
        *) _smcrbd_words "$pdesc"
           vals=$_smcrbd_w ;;
        esac
        spec+="$short $long ${arg:+ARG }$vals"$'\n'
        short=-
    done
    phead=
}

# Reads PROGRAM --help into _smcrbd_specs and _smcrbd_cmds (once).
_smcrbd_load()
{
    local prog=$1 help line spec= cmds= incmds=0
    [[ -n ${_smcrbd_specs[$prog]+set} ]] && return 0
    help=$(LC_ALL=C "$prog" --help 2>&1) || [[ -n $help ]] || return 1
    local re_line='^  (-[A-Za-z0-9], (.*)|    (--[A-Za-z0-9].*))$'
    local tok phead= pdesc= pshort
    while IFS= read -r line; do
        if [[ $line == Commands* ]]; then
            incmds=1
            continue
        fi
        if (( incmds )); then
            if [[ -z $line ]]; then
                incmds=0
            elif [[ $line =~ ^\ \ ([a-z][a-z-]*)( |$) ]]; then
                cmds+=" ${BASH_REMATCH[1]}"
            fi
            continue
        fi
        # "  -x, --name ARG  text", "      --name=ARG  text" or
        # "  -h, --help, -V, --version"; the text goes on in the lines
        # indented deeper.
        if [[ $line =~ $re_line ]]; then
            tok=${BASH_REMATCH[2]}${BASH_REMATCH[3]}
            _smcrbd_add
            phead=$tok
            pshort=${line:2:2}
            [[ $pshort == -? ]] || pshort=-
            pdesc=
            if [[ $phead == *'  '* ]]; then
                pdesc=${phead#*  }
                phead=${phead%%  *}
            fi
            tok=${phead%% *}
            if [[ $tok == *=* && $phead == *' '* ]]; then
                pdesc="${phead#* } $pdesc"
                phead=$tok
            fi
        elif [[ -n $phead && $line == '        '*[![:space:]]* ]]; then
            tok=${line#"${line%%[! ]*}"}
            pdesc+=" $tok"
        else
            _smcrbd_add
        fi
    done <<<"$help"
    _smcrbd_add
    _smcrbd_specs[$prog]=$spec
    _smcrbd_cmds[$prog]=${cmds# }
}

# The spec line of option OPT (-x or --name), if it takes an argument.
_smcrbd_argspec()
{
    local prog=$1 opt=$2 s l a rest
    while read -r s l a rest; do
        [[ $a == ARG ]] || continue
        if [[ $opt == "$s" || $opt == "$l" ]]; then
            echo "$rest"
            return 0
        fi
    done <<<"${_smcrbd_specs[$prog]}"
    return 1
}

# COMPREPLY for the value CUR of an option whose spec is VALS.
_smcrbd_value()
{
    local vals=$1 cur=$2
    case $vals in
    FILE)
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -f -- "$cur")) ;;
    DIR)
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -d -- "$cur")) ;;
    ?*) COMPREPLY=($(compgen -W "$vals" -- "$cur")) ;;
    esac
}

_smcrbd()
{
    local prog=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]} prev= opt= vals
    local i w cmd= nargs=0 skip=0 join=0 sopt= dir=
    COMPREPLY=()
    (( COMP_CWORD > 0 )) && prev=${COMP_WORDS[COMP_CWORD-1]}
    [[ $prog == */* ]] || prog=$(type -P "$prog") || return 0
    _smcrbd_load "$prog" || return 0

    # An option's value: --name=VALUE in one word, or split at the '='
    # (COMP_WORDBREAKS), or the word after the option.
    if [[ $cur == --*=* ]]; then
        opt=${cur%%=*}
        cur=${cur#*=}
    elif [[ $cur == = && $prev == --* ]]; then
        opt=$prev
        cur=
    elif [[ $prev == = ]] && (( COMP_CWORD >= 2 )); then
        opt=${COMP_WORDS[COMP_CWORD-2]}
    elif [[ $prev == -* && $prev != *=* ]] && _smcrbd_argspec "$prog" "$prev" >/dev/null; then
        opt=$prev
    fi
    if [[ -n $opt ]]; then
        vals=$(_smcrbd_argspec "$prog" "$opt") || return 0
        _smcrbd_value "$vals" "$cur"
        return 0
    fi

    if [[ $cur == -* ]]; then
        local s l rest longs=
        while read -r s l rest; do
            [[ -n $l ]] && longs+=" $l"
        done <<<"${_smcrbd_specs[$prog]}"
        COMPREPLY=($(compgen -W "$longs" -- "$cur"))
        return 0
    fi

    # Not an option: smcrctl's command and its TARGET, else file names.
    if [[ -n ${_smcrbd_cmds[$prog]} ]]; then
        for (( i = 1; i < COMP_CWORD; i++ )); do
            w=${COMP_WORDS[i]}
            if (( skip )); then
                # an option's value (after a '=' of its own, maybe)
                if [[ $w != = ]]; then
                    skip=0
                    [[ $sopt == -d || $sopt == --dir ]] && dir=$w
                fi
            elif [[ $w == --dir=* ]]; then
                dir=${w#--dir=}
            elif [[ $w == -* ]]; then
                [[ $w != *=* ]] && _smcrbd_argspec "$prog" "$w" >/dev/null && skip=1 sopt=$w
            elif [[ $w == = ]]; then
                join=1          # SPEC's a=b split at COMP_WORDBREAKS' '='
            elif [[ -z $cmd ]]; then
                cmd=$w
            elif (( join )); then
                join=0
            else
                nargs=$((nargs + 1))
            fi
        done
        if [[ -z $cmd ]]; then
            COMPREPLY=($(compgen -W "${_smcrbd_cmds[$prog]}" -- "$cur"))
            return 0
        fi
        # The argument that names a program: the command's first, or its
        # second after fail-link N and fault SPEC (options not counted).
        local want=1
        [[ $cmd == fail-link || $cmd == fault ]] && want=2
        [[ $cmd == list ]] && want=0
        if (( want && nargs + 1 == want )); then
            local names
            names=$("$prog" ${dir:+--dir "$dir"} list 2>/dev/null |
                    awk 'NR > 1 && NF { print $1 }')
            COMPREPLY=($(compgen -W "$names" -- "$cur"))
        fi
        return 0
    fi
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -f -- "$cur"))
}

complete -F _smcrbd smcrd smcrctl smcr-attach smcr-fuse
