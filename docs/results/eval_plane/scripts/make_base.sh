#!/bin/sh
# The before tree of .gpu/h200.sh: COMMIT's files in .gpu/base (git archive), its short commit in
# .gpu/base/.commit (eval_plane reads it there) and this tree's in .gpu/after.commit ("+dirty"
# where the working tree differs from HEAD). Run it in the repository root before the call:
#   sh .gpu/make_base.sh COMMIT
set -eu
[ $# -eq 1 ] || { echo "usage: sh .gpu/make_base.sh COMMIT" >&2; exit 2; }
rm -rf .gpu/base && mkdir -p .gpu/base && git archive "$1" | tar -x -C .gpu/base
git rev-parse --short "$1^{commit}" > .gpu/base/.commit
after=$(git rev-parse --short HEAD)
[ -z "$(git status --porcelain)" ] || after="$after+dirty"
echo "$after" > .gpu/after.commit
echo "before: $(cat .gpu/base/.commit) in .gpu/base ($(du -sh .gpu/base | cut -f1)); after: $after"
