# bash completion for ductile. Install: see the README ("Shell completion").
# Adapted from urfave/cli v2's autocomplete/bash_autocomplete (MIT licence,
# Copyright (c) 2022 urfave/cli maintainers): the candidates come from the
# binary itself (ductile WORDS... --generate-bash-completion), so they follow
# the command tree of the ductile on PATH. Works with or without the
# bash-completion package.

_ductile_complete() {
  local cur words cword
  COMPREPLY=()
  if declare -F _init_completion >/dev/null 2>&1; then
    _init_completion -n "=:" || return
  else
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
    cur="${COMP_WORDS[COMP_CWORD]}"
  fi
  local request=("${words[@]:0:$cword}")
  if [[ "$cur" == "-"* ]]; then
    request+=("$cur")
  fi
  local opts
  opts=$("${request[@]}" --generate-bash-completion 2>/dev/null)
  COMPREPLY=($(compgen -W "${opts}" -- "${cur}"))
  return 0
}

complete -o bashdefault -o default -F _ductile_complete ductile
