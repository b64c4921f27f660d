# Sourced by bench/card-costs and bench/torch/gpu-session: build_header prints where a GPU run came from, for
# its 1-build.txt: the date, the commit, how many tracked files differ from that commit, the commit the run was
# asked for where .gpubuild/commit names another (a copy of a tree whose git metadata names a different tip),
# and the card.
build_header() {
  local head asked changed
  echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  head=$(git rev-parse HEAD 2>/dev/null)
  echo "commit:  ${head:-(no git metadata in this copy)}"
  if [[ -n $head ]]; then
    changed=$(git diff --name-only HEAD 2>/dev/null | wc -l)
    [[ $changed -gt 0 ]] && echo "changed: $changed tracked files differ from that commit (git diff --name-only HEAD)"
  fi
  asked=$(cat .gpubuild/commit 2>/dev/null)
  [[ -n $asked && $asked != "$head" ]] && echo "asked:   $asked (.gpubuild/commit: the commit the tree was checked out at)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
}
