package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/client"
)

// newLogsCommand is kubectl afe logs RUN [-f].
func newLogsCommand(newClient clientFunc, streams genericiooptions.IOStreams) *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:               "logs RUN [-f]",
		Short:             "Print a Run's output; with -f follow it until the Run ends and exit with its exit code",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirst(newClient, "Run"),
		RunE: func(_ *cobra.Command, args []string) error {
			return withClient(newClient, func(c *client.Client) error {
				return logsCommand(c, args[0], follow, streams.Out, streams.ErrOut)
			})
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "Follow the output until the Run ends; exit with its exit code.")
	return cmd
}

// logsCommand prints a Run's whole output, as the manager kept it (the
// access API), or its status.output when the manager keeps none. With -f it
// follows the output until the Run ends, attempt after attempt when the Run
// is executed again, and exits with the Run's exit code.
func logsCommand(c *client.Client, name string, follow bool, stdout, stderr io.Writer) error {
	ctx := context.Background()
	run := &afev1.Run{}
	if err := c.Kube().Get(ctx, types.NamespacedName{Namespace: c.Namespace(), Name: name}, run); err != nil {
		return err
	}
	if follow {
		return followLog(ctx, c, run, stdout, stderr)
	}
	l, err := c.Logs(ctx, run.Name, client.LogOptions{})
	if err == nil {
		defer func() { _ = l.Close() }()
		_, err = io.Copy(stdout, l)
		return err
	}
	if classify(err, false) == logFailed {
		return err
	}
	// No log kept: the status has the last 32 KiB.
	if !run.Status.Phase.Terminal() {
		_, _ = fmt.Fprintf(stderr, "run/%s is %s; its output is recorded when it ends\n", run.Name, run.Status.Phase)
	}
	o, _ := client.OutcomeOf(run)
	printOutput(o, stdout, stderr)
	return nil
}

// logOutcome is how the last request for an attempt's log went.
type logOutcome int

const (
	// logNone: the attempt's log was not asked for yet.
	logNone logOutcome = iota
	// logEnded: the attempt's log was printed to its end.
	logEnded
	// logCut: the stream broke off (the manager serving it stopped).
	logCut
	// logMissing: the attempt has no log, or none yet.
	logMissing
	// logUnavailable: the access API did not answer (503), as while the
	// manager restarts.
	logUnavailable
	// logNotKept: the manager keeps no Run logs, or serves no access API.
	logNotKept
	// logFailed: any other answer, an error to report.
	logFailed
)

// classify is the outcome of a refused request for a log, by the access
// API's reason (api/access/v1alpha1), never by its message. served says
// a log was served to this caller already: a manager restarting under
// logs -f answered Unauthorized once (in CI) while the API server's view
// of it settled, so after a log was served that is the manager
// unavailable for a moment, as a 503 is, retried until the Run ends.
func classify(err error, served bool) logOutcome {
	switch {
	case client.ReasonOf(err) == string(accessv1.ReasonLogNotFound):
		return logMissing
	case apierrors.IsServiceUnavailable(err), served && apierrors.IsUnauthorized(err):
		return logUnavailable
	case client.IsNotFound(err):
		// The manager keeps no logs, or serves no access API.
		return logNotKept
	}
	return logFailed
}

// followState is where logs -f is in the Run's attempts.
type followState struct {
	// attempt is the attempt followed; 0 until a log is found, then the
	// latest attempt's is asked for.
	attempt int32
	// copied is how much of its log was printed.
	copied int64
	// started: its log was found (its separator printed).
	started bool
	// found: the log of some attempt was found.
	found bool
	last  logOutcome
	// endedBefore: the Run had ended when the last request was made, so
	// that what it lacked will never come.
	endedBefore bool
	err         error
}

// followAction is what logs -f does next.
type followAction int

const (
	// actRead asks for the attempt's log now.
	actRead followAction = iota
	// actReadLater asks for it again in a moment.
	actReadLater
	// actWaitRun reads the Run again in a moment: its log is printed,
	// and the Run neither ended nor was executed again yet.
	actWaitRun
	// actNext follows the next attempt.
	actNext
	// actStatus prints status.output, as no log was kept, and ends.
	actStatus
	// actEnd ends with the Run's exit code.
	actEnd
	// actFail ends with the last error.
	actFail
)

// nextFollow is what logs -f does with the Run as it was just read. An
// attempt's log is made before the next attempt begins and before the Run
// ends: an attempt that had none by then has none.
func nextFollow(st followState, run *afev1.Run) followAction {
	terminal := run.Status.Phase.Terminal()
	later := st.attempt > 0 && run.Status.Attempts > st.attempt
	switch st.last {
	case logNone:
		return actRead
	case logEnded:
		switch {
		case later:
			return actNext
		case terminal:
			return actEnd
		}
		return actWaitRun
	case logMissing:
		switch {
		case later:
			return actNext
		case !st.endedBefore:
			return actReadLater
		case st.found:
			return actEnd
		}
		return actStatus
	case logCut, logUnavailable:
		switch {
		case !st.endedBefore:
			return actReadLater
		case st.found:
			return actFail
		}
		return actStatus
	case logNotKept:
		switch {
		case !terminal:
			return actWaitRun
		case st.found:
			return actEnd
		}
		return actStatus
	}
	return actFail
}

// followPause is how long logs -f waits before it looks again.
const followPause = 500 * time.Millisecond

// followLog prints the Run's log as it grows, from its latest attempt on
// to every later one, until the Run ends; then it exits with the Run's exit
// code. A Run that ends with no log prints its status.output.
func followLog(ctx context.Context, c *client.Client, run *afev1.Run, stdout, stderr io.Writer) error {
	key := types.NamespacedName{Namespace: run.Namespace, Name: run.Name}
	var st followState
	for {
		act := nextFollow(st, run)
		switch act {
		case actEnd:
			o, err := client.OutcomeOf(run)
			return runExit(o, err, stderr)
		case actStatus:
			o, err := client.OutcomeOf(run)
			printOutput(o, stdout, stderr)
			return runExit(o, err, stderr)
		case actFail:
			return st.err
		case actNext:
			st = followState{attempt: st.attempt + 1, found: st.found}
			continue
		case actWaitRun, actReadLater:
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(followPause):
			}
			if err := c.Kube().Get(ctx, key, run); err != nil {
				return err
			}
			if act == actWaitRun {
				continue
			}
		}
		var err error
		if st, err = followAttempt(ctx, c, st, run, stdout, stderr); err != nil {
			return err
		}
		if err := c.Kube().Get(ctx, key, run); err != nil {
			return err
		}
	}
}

// followAttempt asks for the followed attempt's log, with the Run as read
// just before, and prints what was not printed of it yet.
func followAttempt(ctx context.Context, c *client.Client, st followState, run *afev1.Run, stdout, stderr io.Writer) (followState, error) {
	st.endedBefore = run.Status.Phase.Terminal()
	// An attempt before the Run's latest is over, even when its end was
	// never written (the manager running it was killed): not followed.
	follow := st.attempt == 0 || st.attempt >= run.Status.Attempts
	l, err := c.Logs(ctx, run.Name, client.LogOptions{Attempt: st.attempt, Follow: follow})
	if err != nil {
		st.last, st.err = classify(err, st.found), err
		if st.last == logFailed {
			return st, err
		}
		return st, nil
	}
	defer func() { _ = l.Close() }()
	if st.attempt == 0 {
		st.attempt = max(run.Status.Attempts, 1)
		if l.Attempt > 0 {
			st.attempt = l.Attempt
		}
	}
	if !st.started && st.found {
		_, _ = fmt.Fprintf(stderr, "--- run/%s: attempt %d ---\n", run.Name, st.attempt)
	}
	st.started, st.found = true, true
	// What was printed before the stream broke off is skipped.
	if _, err := io.CopyN(io.Discard, l, st.copied); err != nil {
		st.last, st.err = logCut, fmt.Errorf("the log of attempt %d broke off: %w", st.attempt, err)
		return st, nil
	}
	out := &countingWriter{w: stdout}
	_, err = io.Copy(out, l)
	st.copied += out.n
	switch {
	case out.err != nil:
		return st, out.err
	case err != nil:
		st.last, st.err = logCut, fmt.Errorf("the log of attempt %d broke off: %w", st.attempt, err)
	default:
		st.last, st.err = logEnded, nil
	}
	return st, nil
}

// countingWriter counts what is written through it, and keeps its error.
type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil {
		c.err = err
	}
	return n, err
}
