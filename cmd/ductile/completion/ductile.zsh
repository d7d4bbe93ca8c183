#compdef ductile
# zsh completion for ductile. Install: see the README ("Shell completion").
# From urfave/cli v2's autocomplete/zsh_autocomplete (MIT licence,
# Copyright (c) 2022 urfave/cli maintainers): the candidates come from the
# binary itself (ductile WORDS... --generate-bash-completion).

_ductile_complete() {
  local -a opts
  local cur
  cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion)}")
  fi

  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}

compdef _ductile_complete ductile
