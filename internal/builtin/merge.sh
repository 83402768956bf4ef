# MergeAndCI, the git part. POSIX sh; every input comes from the
# environment, never from the script's text:
#   AFE_REPO         the repository (/workspace/repo)
#   AFE_LANES_DIR    where branch B's worktree is, at $AFE_LANES_DIR/B
#   AFE_LANES        the lanes, one per line, in merge order
#   AFE_BASE         the ref the integration branch starts from
#   AFE_INTEGRATION  the integration branch
#   AFE_RUN          the Run's name, for commit messages
#   AFE_DATE         the date of every commit made (the Run's creation), so
#                    that an attempt executed again makes the same commits
#   AFE_ATTEMPT      the attempt; from 2 on, the locks a killed earlier
#                    attempt may have left are removed
#   AFE_MAX_CONFLICT_FILES, AFE_MAX_CONFLICT_NAMES
#                    how many conflicting files, and how many bytes of their
#                    names, are listed at most
# Protocol: the lines "afe-builtin WORD ..." on stdout, parsed by the
# controller (internal/builtin); everything else goes to stderr. The script
# exits 0 whenever it could say how things went, "error" lines included.
# The programs git starts (filters, merge drivers) do not inherit stdout,
# but run as the same user and group, so they can open it again through
# /proc: the controller reads only the lines and the order this script
# writes, within bounds, and checks what they say against the repository
# once the script has exited (check.sh).
exec 3>&1 1>&2
say() { { printf 'afe-builtin'; printf ' %s' "$@"; printf '\n'; } >&3; }
fail() { say error "$@"; exit 0; }
set -f
IFS='
'
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_NAMESPACE GIT_CEILING_DIRECTORIES
export GIT_AUTHOR_NAME=afe GIT_AUTHOR_EMAIL=afe@sandbox.invalid
export GIT_COMMITTER_NAME=afe GIT_COMMITTER_EMAIL=afe@sandbox.invalid
export GIT_AUTHOR_DATE="$AFE_DATE" GIT_COMMITTER_DATE="$AFE_DATE"
export GIT_TERMINAL_PROMPT=0 GIT_EDITOR=true GIT_MERGE_AUTOEDIT=no LC_ALL=C

command -v git >/dev/null 2>&1 || fail git-not-found
# No hooks, no fsmonitor, no signing, no pager: the same steps whatever the
# repository's configuration asks for; paths quoted when unusual. git and
# whatever it starts do not inherit the report channel (fd 3), though they
# can reopen it (see above).
g() { git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c commit.gpgSign=false -c core.pager=cat -c core.quotePath=true -c merge.conflictStyle=merge "$@" 3>&-; }

[ -d "$AFE_REPO" ] || fail repository-not-found "$AFE_REPO"
top=$(g -C "$AFE_REPO" rev-parse --show-toplevel 2>/dev/null) || fail repository-not-found "$AFE_REPO"
# A folder inside another repository is not the repository.
[ "$top" = "$(cd "$AFE_REPO" && pwd -P)" ] || fail repository-not-found "$AFE_REPO"

# on_branch DIR BRANCH: the worktree DIR has BRANCH checked out.
on_branch() {
	[ "$(g -C "$1" symbolic-ref -q --short HEAD 2>/dev/null)" = "$2" ]
}

# unlock DIR: removes the index and HEAD locks of worktree DIR. Only for an
# attempt executed again: every process of the attempt before was killed,
# and git leaves its locks behind when killed.
unlock() {
	gd=$(g -C "$1" rev-parse --absolute-git-dir 2>/dev/null) && rm -f "$gd/index.lock" "$gd/HEAD.lock"
}
if [ "${AFE_ATTEMPT:-1}" -gt 1 ]; then
	common=$(g -C "$AFE_REPO" rev-parse --path-format=absolute --git-common-dir 2>/dev/null)
	for b in $AFE_LANES $AFE_INTEGRATION; do
		[ -e "$AFE_LANES_DIR/$b/.git" ] && unlock "$AFE_LANES_DIR/$b"
		[ -n "$common" ] && rm -f "$common/refs/heads/$b.lock"
	done
	unlock "$AFE_REPO"
fi

# 1. Commit each lane's worktree when it has changes.
for lane in $AFE_LANES; do
	g -C "$AFE_REPO" rev-parse -q --verify "refs/heads/$lane^{commit}" >/dev/null || fail ref-not-found lane "$lane"
	dir="$AFE_LANES_DIR/$lane"
	if [ -e "$dir/.git" ]; then
		on_branch "$dir" "$lane" || fail git-failed "worktree $dir is not on branch $lane"
		g -C "$dir" add -A || fail git-failed "git add in $dir"
		if g -C "$dir" diff --cached --quiet; then
			say unchanged "$lane"
		else
			g -C "$dir" commit -q --no-verify -m "afe: lane $lane, Run $AFE_RUN" || fail git-failed "git commit in $dir"
			say committed "$lane" "$(g -C "$dir" rev-parse HEAD)"
		fi
	fi
done

# 2. The integration branch, at the base, in its own clean worktree.
base=$(g -C "$AFE_REPO" rev-parse -q --verify "$AFE_BASE^{commit}") || fail ref-not-found base "$AFE_BASE"
say base "$base"
int="$AFE_LANES_DIR/$AFE_INTEGRATION"
if [ -e "$int/.git" ]; then
	g -C "$int" merge --abort >/dev/null 2>&1
	g -C "$int" reset -q --hard || fail git-failed "git reset in $int"
	g -C "$int" clean -q -ffdx || fail git-failed "git clean in $int"
	g -C "$int" checkout -q -B "$AFE_INTEGRATION" "$base" || fail git-failed "git checkout -B $AFE_INTEGRATION in $int"
elif [ -e "$int" ]; then
	fail git-failed "$int exists and is not a worktree"
else
	g -C "$AFE_REPO" worktree prune
	mkdir -p "$(dirname "$int")" || fail git-failed "mkdir $(dirname "$int")"
	g -C "$AFE_REPO" worktree add -q -B "$AFE_INTEGRATION" "$int" "$base" || fail git-failed "git worktree add $int"
fi

# 3. Merge the lanes in order; stop at the first conflict.
for lane in $AFE_LANES; do
	head=$(g -C "$AFE_REPO" rev-parse "refs/heads/$lane")
	if g -C "$int" merge -q --no-ff --no-verify -m "afe: merge lane $lane into $AFE_INTEGRATION, Run $AFE_RUN" "$head"; then
		say merged "$lane" "$head"
		continue
	fi
	files=$(g -C "$int" diff --name-only --diff-filter=U)
	if [ -z "$files" ]; then
		g -C "$int" merge --abort >/dev/null 2>&1
		fail git-failed "git merge of lane $lane"
	fi
	say conflict "$lane" "$head"
	n=0 bytes=0
	for f in $files; do
		n=$((n + 1)) bytes=$((bytes + ${#f}))
		if [ "$n" -gt "$AFE_MAX_CONFLICT_FILES" ] || [ "$bytes" -gt "$AFE_MAX_CONFLICT_NAMES" ]; then
			say truncated "$lane"
			break
		fi
		say file "$lane" "$f"
	done
	g -C "$int" merge --abort || fail git-failed "git merge --abort of lane $lane"
	say integration "$(g -C "$int" rev-parse HEAD)"
	say done conflict
	exit 0
done
say integration "$(g -C "$int" rev-parse HEAD)"
say done merged
