package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// logsCommand prints a Run's whole output, as the manager kept it (the
// access API), or its status.output when the manager keeps none. With -f it
// follows the output until the Run ends, attempt after attempt when the Run
// is executed again, and exits with the Run's exit code.
func logsCommand(c client.WithWatch, cfg *rest.Config, ns string, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("logs", stderr)
	follow := fs.Bool("f", false, "Follow the output until the Run ends; exit with its exit code.")
	fs.BoolVar(follow, "follow", false, "Same as -f.")
	if err := fs.Parse(args); err != nil {
		return exitError{2}
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("logs needs exactly one RUN")
	}
	ctx := context.Background()
	run := &afev1.Run{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: fs.Arg(0)}, run); err != nil {
		return err
	}
	lc, err := newLogClient(cfg, run)
	if err != nil {
		return err
	}
	if *follow {
		return followLog(ctx, c, lc, run, stdout, stderr)
	}
	resp, err := lc.get(ctx, 0, false)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode == http.StatusOK {
		_, err = io.Copy(stdout, resp.Body)
		return err
	}
	if outcome, apiErr := classify(resp); outcome == logFailed {
		return apiErr
	}
	// No log kept: the status has the last 32 KiB.
	if !run.Status.Phase.Terminal() {
		_, _ = fmt.Fprintf(stderr, "run/%s is %s; its output is recorded when it ends\n", run.Name, run.Status.Phase)
	}
	printOutput(run, stdout, stderr)
	return nil
}

// logClient reads a Run's log from the access API.
type logClient struct {
	hc  *http.Client
	url *url.URL
}

func newLogClient(cfg *rest.Config, run *afev1.Run) (*logClient, error) {
	u, err := accessURL(cfg, run.Namespace, "runs", run.Name, "log")
	if err != nil {
		return nil, err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &logClient{hc: hc, url: u}, nil
}

// get asks for the attempt's log (0: the latest attempt's).
func (lc *logClient) get(ctx context.Context, attempt int32, follow bool) (*http.Response, error) {
	u := *lc.url
	q := url.Values{}
	if follow {
		q.Set("follow", "true")
	}
	if attempt > 0 {
		q.Set("attempt", strconv.Itoa(int(attempt)))
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	return lc.hc.Do(req)
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

// classify is the outcome of an answer other than 200, and its error.
func classify(resp *http.Response) (logOutcome, error) {
	apiErr := apiError(resp)
	switch {
	case resp.StatusCode == http.StatusNotFound && strings.Contains(apiErr.Error(), "has no log"):
		return logMissing, apiErr
	case resp.StatusCode == http.StatusNotFound:
		return logNotKept, apiErr
	case resp.StatusCode == http.StatusServiceUnavailable:
		return logUnavailable, apiErr
	}
	return logFailed, apiErr
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
func followLog(ctx context.Context, c client.Client, lc *logClient, run *afev1.Run, stdout, stderr io.Writer) error {
	key := client.ObjectKeyFromObject(run)
	var st followState
	for {
		act := nextFollow(st, run)
		switch act {
		case actEnd:
			return runExit(run, stderr)
		case actStatus:
			printOutput(run, stdout, stderr)
			return runExit(run, stderr)
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
			if err := c.Get(ctx, key, run); err != nil {
				return err
			}
			if act == actWaitRun {
				continue
			}
		}
		var err error
		if st, err = followAttempt(ctx, lc, st, run, stdout, stderr); err != nil {
			return err
		}
		if err := c.Get(ctx, key, run); err != nil {
			return err
		}
	}
}

// followAttempt asks for the followed attempt's log, with the Run as read
// just before, and prints what was not printed of it yet.
func followAttempt(ctx context.Context, lc *logClient, st followState, run *afev1.Run, stdout, stderr io.Writer) (followState, error) {
	st.endedBefore = run.Status.Phase.Terminal()
	// An attempt before the Run's latest is over, even when its end was
	// never written (the manager running it was killed): not followed.
	follow := st.attempt == 0 || st.attempt >= run.Status.Attempts
	resp, err := lc.get(ctx, st.attempt, follow)
	if err != nil {
		return st, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		st.last, st.err = classify(resp)
		if st.last == logFailed {
			return st, st.err
		}
		return st, nil
	}
	if st.attempt == 0 {
		st.attempt = max(run.Status.Attempts, 1)
		if n, err := strconv.ParseInt(resp.Header.Get("X-Afe-Attempt"), 10, 32); err == nil && n > 0 {
			st.attempt = int32(n)
		}
	}
	if !st.started && st.found {
		_, _ = fmt.Fprintf(stderr, "--- run/%s: attempt %d ---\n", run.Name, st.attempt)
	}
	st.started, st.found = true, true
	// What was printed before the stream broke off is skipped.
	if _, err := io.CopyN(io.Discard, resp.Body, st.copied); err != nil {
		st.last, st.err = logCut, fmt.Errorf("the log of attempt %d broke off: %w", st.attempt, err)
		return st, nil
	}
	out := &countingWriter{w: stdout}
	_, err = io.Copy(out, resp.Body)
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
