package main

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

func TestNextFollow(t *testing.T) {
	runOf := func(phase afev1.RunPhase, attempts int32) *afev1.Run {
		return &afev1.Run{Status: afev1.RunStatus{Phase: phase, Attempts: attempts}}
	}
	tests := map[string]struct {
		st   followState
		run  *afev1.Run
		want followAction
	}{
		"first look": {st: followState{}, run: runOf(afev1.RunPending, 0), want: actRead},
		"next attempt, asked for at once": {
			st: followState{attempt: 2, found: true}, run: runOf(afev1.RunRunning, 2), want: actRead},

		"no log yet, the Run waits": {
			st: followState{last: logMissing}, run: runOf(afev1.RunPending, 0), want: actReadLater},
		"no log yet when asked, the Run ended since: asked again": {
			st: followState{last: logMissing}, run: runOf(afev1.RunFailed, 0), want: actReadLater},
		"no log, the Run had ended without executing: its status": {
			st: followState{last: logMissing, endedBefore: true}, run: runOf(afev1.RunFailed, 0), want: actStatus},
		"no log of the last attempt after an earlier one was printed": {
			st: followState{attempt: 2, found: true, last: logMissing, endedBefore: true}, run: runOf(afev1.RunFailed, 2), want: actEnd},
		"no log of a past attempt: the next one": {
			st: followState{attempt: 2, found: true, last: logMissing}, run: runOf(afev1.RunRunning, 3), want: actNext},

		"attempt printed to its end, the Run ended": {
			st: followState{attempt: 1, found: true, last: logEnded}, run: runOf(afev1.RunCompleted, 1), want: actEnd},
		"attempt printed to its end, the Run executed again": {
			st: followState{attempt: 1, found: true, last: logEnded}, run: runOf(afev1.RunRunning, 2), want: actNext},
		"attempt printed to its end, the Run executed again and ended": {
			st: followState{attempt: 1, found: true, last: logEnded}, run: runOf(afev1.RunCompleted, 2), want: actNext},
		"attempt printed to its end, the Run still Running (its manager restarts)": {
			st: followState{attempt: 1, found: true, last: logEnded}, run: runOf(afev1.RunRunning, 1), want: actWaitRun},

		"stream broke off while the Run ran": {
			st: followState{attempt: 1, found: true, last: logCut}, run: runOf(afev1.RunRunning, 1), want: actReadLater},
		"stream broke off after the Run had ended": {
			st: followState{attempt: 1, found: true, last: logCut, endedBefore: true}, run: runOf(afev1.RunCompleted, 1), want: actFail},
		"access API unavailable while the Run runs (the manager restarts)": {
			st: followState{last: logUnavailable}, run: runOf(afev1.RunRunning, 1), want: actReadLater},
		"access API unavailable, the Run had ended, nothing printed": {
			st: followState{last: logUnavailable, endedBefore: true}, run: runOf(afev1.RunCompleted, 1), want: actStatus},

		"no logs kept, the Run runs": {
			st: followState{last: logNotKept}, run: runOf(afev1.RunRunning, 1), want: actWaitRun},
		"no logs kept, the Run ended": {
			st: followState{last: logNotKept}, run: runOf(afev1.RunTimedOut, 1), want: actStatus},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := nextFollow(tc.st, tc.run); got != tc.want {
				t.Errorf("nextFollow = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	for name, tc := range map[string]struct {
		err    error
		served bool
		want   logOutcome
	}{
		"503: the manager restarting":                        {apierrors.NewServiceUnavailable("x"), false, logUnavailable},
		"401 before any log was served: an error to report":  {apierrors.NewUnauthorized("x"), false, logFailed},
		"401 after a log was served: the manager restarting": {apierrors.NewUnauthorized("x"), true, logUnavailable},
		"403 after a log was served: still an error":         {apierrors.NewForbidden(schema.GroupResource{Resource: "runs"}, "r", nil), true, logFailed},
	} {
		if got := classify(tc.err, tc.served); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}
