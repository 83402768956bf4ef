// Package builtin holds the pure parts of the builtin Runs: the git script
// of MergeAndCI with its inputs, the bounded parser of what it reports and
// the check of that report against the repository, the composition of
// status.result, the names of snapshot volumes, and the checks of git ref
// names.
//
// The git script is a constant: every input reaches it through the
// environment, so no user string is ever part of a script's text.
package builtin

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// MergeScript is the git part of MergeAndCI (merge.sh).
//
//go:embed merge.sh
var MergeScript string

// MergeCommand is the exec command of the git part.
func MergeCommand() []string { return []string{"/bin/sh", "-c", MergeScript, "afe-merge"} }

// CICommand is the exec command of ciScript.
func CICommand(script string) []string { return []string{"/bin/sh", "-c", script} }

// Merge is what the git part works with.
type Merge struct {
	Lanes       []string
	Integration string
	Base        string
	Run         string
	// Date is the date of every commit made: the Run's creation.
	Date    time.Time
	Attempt int32
}

// MergeOf reads the MergeAndCI fields of a Run, with defaults.
func MergeOf(run *afev1.Run) Merge {
	m := Merge{
		Integration: string(run.Spec.IntegrationBranch),
		Base:        string(run.Spec.BaseRef),
		Run:         run.Name,
		Date:        run.CreationTimestamp.Time,
		Attempt:     run.Status.Attempts,
	}
	if m.Integration == "" {
		m.Integration = afev1.DefaultIntegrationBranch
	}
	for _, l := range run.Spec.Lanes {
		m.Lanes = append(m.Lanes, string(l))
	}
	return m
}

// Env is the environment of the git part.
func (m Merge) Env() []string {
	return []string{
		"AFE_REPO=" + afev1.RepoDir,
		"AFE_LANES_DIR=" + afev1.LanesDir,
		"AFE_LANES=" + strings.Join(m.Lanes, "\n"),
		"AFE_BASE=" + m.Base,
		"AFE_INTEGRATION=" + m.Integration,
		"AFE_RUN=" + m.Run,
		"AFE_DATE=@" + strconv.FormatInt(m.Date.Unix(), 10) + " +0000",
		"AFE_ATTEMPT=" + strconv.Itoa(int(m.Attempt)),
		"AFE_MAX_CONFLICT_FILES=" + strconv.Itoa(MaxConflictFiles),
		"AFE_MAX_CONFLICT_NAMES=" + strconv.Itoa(MaxConflictNames),
	}
}

// IntegrationDir is the worktree of the integration branch, where ciScript
// runs.
func (m Merge) IntegrationDir() string { return afev1.LanesDir + "/" + m.Integration }

// CIEnv is the environment ciScript gets besides the sandbox's.
func (m Merge) CIEnv(rep *Report) []string {
	return []string{
		"AFE_RUN=" + m.Run,
		"AFE_INTEGRATION_BRANCH=" + m.Integration,
		"AFE_INTEGRATION_COMMIT=" + rep.Integration,
		"AFE_BASE_COMMIT=" + rep.Base,
	}
}

// Validate checks the MergeAndCI fields again (the CRD checks them first).
func (m Merge) Validate() error {
	if len(m.Lanes) == 0 {
		return fmt.Errorf("lanes is empty")
	}
	seen := map[string]bool{}
	for _, l := range m.Lanes {
		if err := ValidateRefName(l); err != nil {
			return fmt.Errorf("lane %q: %w", l, err)
		}
		if seen[l] {
			return fmt.Errorf("lane %q is listed twice", l)
		}
		seen[l] = true
	}
	if err := ValidateRefName(m.Integration); err != nil {
		return fmt.Errorf("integrationBranch %q: %w", m.Integration, err)
	}
	if seen[m.Integration] {
		return fmt.Errorf("integrationBranch %q is also a lane", m.Integration)
	}
	if err := ValidateRefName(m.Base); err != nil {
		return fmt.Errorf("baseRef %q: %w", m.Base, err)
	}
	return nil
}
