#!/bin/bash
# After fetching repositories with the index's fetch tool (each lands in /work/.mirror/owner+name/),
# collect each one's net files and delete its mirror:
#   tools/census/walk.sh owner/name ...            (a mirror that is not there: fetch-failed)
#   tools/census/walk.sh owner/name=too-big ...    (record a status, e.g. the snapshot was refused)
#   tools/census/walk.sh --next N                 (the next N repositories of the frame, in order:
#                                                  fetch exactly those of `frame.py next N` first)
here=$(dirname "$0")
args=("$@")
if [ "$1" = "--next" ]; then
  mapfile -t args < <(python3 "$here/frame.py" next "$2")
fi
for arg in "${args[@]}"; do
  repo=${arg%%=*}; status=${arg#*=}; [ "$status" = "$arg" ] && status=""
  top=/work/.mirror/${repo/\//+}
  if [ -n "$status" ]; then
    python3 "$here/collect.py" --repo "$repo" --status "$status"
  elif [ -d "$top/repo/.git" ]; then
    python3 "$here/collect.py" --repo "$repo" --mirror "$top/repo/.git"
  elif [ -d "$top/repo" ]; then
    python3 "$here/collect.py" --repo "$repo" --mirror "$top/repo"
  else
    python3 "$here/collect.py" --repo "$repo" --status fetch-failed
  fi
  rm -rf "$top"
done
