# bash completion for thumbpipe(1). Installed as
# share/bash-completion/completions/thumbpipe; needs nothing but bash itself.
# Its option lists must match each command's --help (a test compares them).

_thumbpipe() {
    local cur prev cmd i
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD - 1]}
    local commands="run scan inspect extract contact-sheet merge report pipeline help"
    local formats="jpeg png webp heif tiff gif jp2k jxl svg pdf magick openexr fits rad ppm analyze mat vips csv matrix openslide"

    cmd=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
            -*) ;;
            *) cmd=${COMP_WORDS[i]}; break ;;
        esac
    done

    if [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
        return
    fi

    # Values of the option just typed.
    case $prev in
        --fail-on)
            COMPREPLY=($(compgen -W "none truncated error warning" -- "$cur")); return ;;
        --sandbox)
            COMPREPLY=($(compgen -W "required auto off" -- "$cur")); return ;;
        --exit-on-failure)
            COMPREPLY=($(compgen -W "any new" -- "$cur")); return ;;
        --formats)
            # A comma-separated list: complete the last name after the last comma.
            local head=${cur%,*} last=${cur##*,}
            [[ $cur == *,* ]] && head="$head," || head=""
            COMPREPLY=($(compgen -P "$head" -W "$formats" -- "$last"))
            compopt -o nospace 2>/dev/null
            return ;;
        --pipeline)
            COMPREPLY=($(compgen -W "$(thumbpipe pipeline list -q 2>/dev/null | cut -f1)" -- "$cur")
                $(compgen -f -X '!*.json' -- "$cur") $(compgen -d -- "$cur"))
            return ;;
        -o | --output | --log | --trace)
            COMPREPLY=($(compgen -f -- "$cur")); return ;;
        -j | --jobs | --width | --height | --scale | --corner-radius | --quality | --max-pixels | \
            --timeout | --set | --ext | --max-removed | --shard | --run-id | --wait | --columns | --per-sheet | \
            --trace-sample)
            return ;;
    esac

    local opts=""
    case $cmd in
        run)
            # BEGIN generated run options: bash (make docs writes this from the option table)
            opts="-o --output -r --recursive --ext --pipeline -j --jobs --width --height --scale --corner-radius --quality --max-pixels --fail-on --formats --timeout --set --no-html --log --trace --trace-sample --metrics --collection --force --dry-run --json --max-removed --verify-content --exit-on-failure --prune-missing --prefer-exif-date --time-zone --rebuild-state --sandbox --shard --run-id -q --quiet -h --help"
            # END generated run options
            ;;
        scan) opts="-o --output -r --recursive --ext --force --update --no-metadata -j --jobs -q --quiet -h --help" ;;
        inspect) opts="--json -q --quiet -h --help" ;;
        extract) opts="-q --quiet -h --help" ;;
        contact-sheet) opts="-o --output --columns --per-sheet -q --quiet -h --help" ;;
        merge) opts="-o --output --run-id --wait -q --quiet -h --help" ;;
        report) opts="-o --output --against -q --quiet -h --help" ;;
        pipeline)
            opts="-q --quiet -h --help"
            if [[ $cur != -* ]]; then
                local sub=${COMP_WORDS[i + 1]}
                if ((COMP_CWORD == i + 1)); then
                    COMPREPLY=($(compgen -W "show list" -- "$cur"))
                elif [[ $sub == show ]]; then
                    COMPREPLY=($(compgen -W "$(thumbpipe pipeline list -q 2>/dev/null | cut -f1)" -- "$cur")
                        $(compgen -f -X '!*.json' -- "$cur"))
                fi
                return
            fi ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}
complete -o filenames -o bashdefault -F _thumbpipe thumbpipe
