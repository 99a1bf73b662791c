package main

// completionScripts are what `conveyor completion SHELL` prints. Each asks
// `conveyor __complete -- WORDS...` for candidates; the line ":path" means
// "complete a file name" (backup FILE, --token-file, --data-dir).
var completionScripts = map[string]string{
	// bash: COMP_WORDS splits at '=' and ':', so the words are taken from
	// the line itself; a --flag=value candidate loses its '--flag=' part,
	// which bash does not replace.
	"bash": `# bash completion for conveyor.
# Load it in this shell:   source <(conveyor completion bash)
# Or for every shell:      conveyor completion bash > /etc/bash_completion.d/conveyor
_conveyor() {
    local line=${COMP_LINE:0:COMP_POINT}
    local -a words
    read -ra words <<<"$line"
    [[ $line == *[[:space:]] ]] && words+=("")
    local cur=${words[${#words[@]}-1]}
    local out
    out=$("${words[0]}" __complete -- "${words[@]:1}" 2>/dev/null) || return
    if [[ $out == ":path" ]]; then
        [[ $cur == --*=* ]] && cur=${cur#*=}
        compopt -o filenames 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        return
    fi
    mapfile -t COMPREPLY <<<"$out"
    [[ -z $out ]] && COMPREPLY=()
    if [[ $cur == --*=* && $COMP_WORDBREAKS == *=* ]]; then
        COMPREPLY=("${COMPREPLY[@]#*=}")
    fi
}
complete -F _conveyor conveyor
`,
	// zsh: works sourced (after compinit) and as an autoloaded _conveyor
	// file in $fpath.
	"zsh": `#compdef conveyor
# zsh completion for conveyor.
# Load it in this shell (after compinit):  source <(conveyor completion zsh)
# Or for every shell:  conveyor completion zsh > "${fpath[1]}/_conveyor"
_conveyor() {
    local out
    out=$("${words[1]}" __complete -- "${(@)words[2,CURRENT]}" 2>/dev/null) || return 1
    if [[ $out == ":path" ]]; then
        _files
        return
    fi
    local -a cands
    cands=("${(@f)out}")
    compadd -- "${cands[@]}"
}
if [[ $funcstack[1] == _conveyor ]]; then
    _conveyor "$@"
else
    compdef _conveyor conveyor
fi
`,
	"fish": `# fish completion for conveyor.
# Load it in this shell:  conveyor completion fish | source
# Or for every shell:     conveyor completion fish > ~/.config/fish/completions/conveyor.fish
function __conveyor_complete
    set -l args (commandline -opc) (commandline -ct)
    set -l out ($args[1] __complete -- $args[2..-1] 2>/dev/null)
    if test "$out" = ":path"
        __fish_complete_path (commandline -ct | string replace -r '^--[^=]*=' '')
        return
    end
    printf '%s\n' $out
end
complete -c conveyor -f -a '(__conveyor_complete)'
`,
}
