# MergeAndCI, the check of the git part's report. POSIX sh, with the
# environment of merge.sh (AFE_REPO, AFE_LANES, AFE_BASE, AFE_INTEGRATION).
# It runs once the git part has exited, in an exec with a group of its own:
# no process of the workload has both its uid and its group, so none may
# open its output through /proc or trace it. So it must start no program
# the repository configures: it runs only git plumbing that reads refs and
# commits (rev-parse, merge-base), with hooks and fsmonitor off, no global
# or system configuration, and both lazy fetching off and every transport
# refused (a partial clone would fetch a missing commit through a remote
# helper or upload-pack the repository names; either setting alone stops
# it, GIT_NO_LAZY_FETCH only in a git that knows it).
# Prints, and nothing else on stdout:
#   afe-check lane LANE COMMIT in|out     for each lane, in order
#   afe-check integration COMMIT
#   afe-check base COMMIT in|out
#   afe-check done
# where COMMIT is "-" when the ref does not name a commit, and in/out says
# whether the commit is in the integration branch.
set -f
IFS='
'
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_NAMESPACE GIT_CEILING_DIRECTORIES GIT_CONFIG_PARAMETERS GIT_CONFIG_COUNT GIT_EXEC_PATH
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ALLOW_PROTOCOL=afe-none GIT_NO_LAZY_FETCH=1
export GIT_TERMINAL_PROMPT=0 GIT_OPTIONAL_LOCKS=0 GIT_PAGER=cat LC_ALL=C

say() { printf 'afe-check'; printf ' %s' "$@"; printf '\n'; }
g() { git -C "$AFE_REPO" -c core.hooksPath=/dev/null -c core.fsmonitor=false "$@" </dev/null 2>/dev/null; }
# commit REF: the commit REF names, or "-".
commit() {
	c=$(g rev-parse -q --verify "$1^{commit}") && [ -n "$c" ] || c=-
	printf '%s\n' "$c"
}
# within COMMIT: "in" when COMMIT is in the integration branch.
within() {
	[ "$1" != - ] && [ "$int" != - ] && g merge-base --is-ancestor "$1" "$int" && echo in || echo out
}

int=$(commit "refs/heads/$AFE_INTEGRATION")
for lane in $AFE_LANES; do
	c=$(commit "refs/heads/$lane")
	say lane "$lane" "$c" "$(within "$c")"
done
say integration "$int"
base=$(commit "$AFE_BASE")
say base "$base" "$(within "$base")"
say done
