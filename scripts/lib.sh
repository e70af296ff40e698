# Helpers sourced by the build and test scripts (not run on its own).

# step NAME CMD...: runs CMD with its output in $logs/NAME.log, prints one
# line with the time it took, or the log's tail and exits when it fails.
step() {
  local name="$1" t0=$SECONDS
  shift
  : "${logs:?step needs \$logs}"
  if "$@" >"$logs/$name.log" 2>&1; then
    printf '   %-44s %5ds\n' "$name" $((SECONDS - t0))
  else
    local rc=$?
    echo "   $name FAILED (exit $rc) after $((SECONDS - t0))s; full log: $logs/$name.log"
    tail -n 80 "$logs/$name.log" | sed 's/^/   | /'
    exit "$rc"
  fi
}

# ccache, when installed, for every build: the cache key ignores where the
# checkout lives (CCACHE_BASEDIR, CCACHE_NOHASHDIR), so a fresh clone on a
# machine that kept ~/.cache/ccache compiles from the cache.
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="${root:?}" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-4G}"
fi
ccache_launcher() {
  command -v ccache >/dev/null 2>&1 && echo "-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
  return 0
}
# find_clang: sets clang_cxx and clang_cc to clang 14 (what setup.sh installs)
# or any clang, or to "" when there is none. The sanitizer and fuzz builds use it.
find_clang() {
  clang_cxx="$(command -v clang++-14 || command -v clang++ || true)"
  clang_cc="$(command -v clang-14 || command -v clang || true)"
}
ccache_zero() { command -v ccache >/dev/null 2>&1 && ccache --zero-stats >/dev/null; return 0; }
ccache_report() {
  command -v ccache >/dev/null 2>&1 || return 0
  ccache --print-stats 2>/dev/null | awk -F'\t' '
    $1=="direct_cache_hit"||$1=="preprocessed_cache_hit"{h+=$2} $1=="cache_miss"{m=$2}
    END{if (h+m>0) printf "   ccache: %d of %d compilations from the cache\n", h, h+m}'
}

# pinned_venv VENV REQUIREMENTS: a virtual environment with the pinned packages
# of REQUIREMENTS (made again when the file changes). Fails, leaving no venv,
# when they cannot be installed (no PyPI): the caller then skips, saying so.
pinned_venv() {
  local venv="$1" req="$2" py=/usr/bin/python3
  [[ -x "$py" ]] || py="$(command -v python3)"
  cmp -s "$req" "$venv/.requirements" 2>/dev/null && return 0
  rm -rf "$venv"
  if "$py" -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"; then
    cp "$req" "$venv/.requirements"
    return 0
  fi
  rm -rf "$venv"
  return 1
}

# parallel_steps JOBS NAME1 CMD1 NAME2 CMD2 ...: runs each CMD (a command line,
# split on spaces) as `step` would, JOBS at a time, with its output in
# $logs/NAME.log; then prints one line per step in the order given and, if any
# failed, the first failure's log tail, and exits with its status.
parallel_steps() {
  local jobs="$1" i rc t
  shift
  : "${logs:?parallel_steps needs \$logs}"
  local names=() lines=()
  while (($# >= 2)); do
    names+=("$1")
    lines+=("$2")
    shift 2
  done
  for ((i = 0; i < ${#names[@]}; ++i)); do
    while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
    (
      t0=$SECONDS
      # shellcheck disable=SC2086
      if ${lines[i]} >"$logs/${names[i]}.log" 2>&1; then rc=0; else rc=$?; fi
      echo "$rc $((SECONDS - t0))" >"$logs/${names[i]}.status"
    ) &
  done
  wait
  local failed=""
  for ((i = 0; i < ${#names[@]}; ++i)); do
    read -r rc t <"$logs/${names[i]}.status"
    if ((rc == 0)); then
      printf '   %-44s %5ds\n' "${names[i]}" "$t"
    else
      echo "   ${names[i]} FAILED (exit $rc) after ${t}s; full log: $logs/${names[i]}.log"
      [[ -z "$failed" ]] && failed="$i"
    fi
  done
  if [[ -n "$failed" ]]; then
    tail -n 80 "$logs/${names[failed]}.log" | sed 's/^/   | /'
    read -r rc t <"$logs/${names[failed]}.status"
    exit "$rc"
  fi
}
