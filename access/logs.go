package access

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/runlog"
)

// serveLog answers GET runs/NAME/log[?follow=true][&attempt=N] with the
// whole output the manager kept of the Run's attempt (the last one by
// default), as text, growing until the attempt ends with follow; 404 when
// the attempt has no log (yet). The Run is read from the API server and
// its log found by its UID.
func (s *Server) serveLog(w http.ResponseWriter, r *http.Request, req *request) {
	ctx := r.Context()
	if s.opts.RunLogs == nil {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, accessv1.ReasonLogsNotKept, "this manager keeps no Run logs")
		return
	}
	run := &afev1.Run{}
	if err := s.reader.Get(ctx, types.NamespacedName{Namespace: req.namespace, Name: req.name}, run); err != nil {
		if apierrors.IsNotFound(err) {
			writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, accessv1.ReasonRunNotFound, fmt.Sprintf("runs.sandbox.afe.dev %q not found", req.name))
			return
		}
		writeError(w, err)
		return
	}
	q := r.URL.Query()
	follow, _ := strconv.ParseBool(q.Get("follow"))
	var attempt int32
	if a := q.Get("attempt"); a != "" {
		n, err := strconv.ParseInt(a, 10, 32)
		if err != nil || n < 1 {
			writeError(w, badRequest("attempt %q is not a positive number", a))
			return
		}
		attempt = int32(n)
	} else {
		var err error
		if attempt, err = s.opts.RunLogs.Latest(run.UID); err != nil {
			if errors.Is(err, runlog.ErrNoLog) {
				writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, accessv1.ReasonLogNotFound, fmt.Sprintf("run %s has no log yet: it has not started", req.name))
				return
			}
			writeError(w, err)
			return
		}
	}
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set(accessv1.AttemptHeader, strconv.Itoa(int(attempt)))
	err := s.opts.RunLogs.Copy(ctx, w, flush, run.UID, attempt, follow, s.attemptOver(ctx, run, attempt))
	switch {
	case errors.Is(err, runlog.ErrNoLog):
		// Nothing was written yet: the attempt has no log (yet).
		w.Header().Del(accessv1.AttemptHeader)
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, accessv1.ReasonLogNotFound, fmt.Sprintf("run %s has no log of attempt %d yet", req.name, attempt))
	case err != nil && !errors.Is(err, ctx.Err()):
		s.log.Error(err, "Cannot serve the Run's log", "namespace", req.namespace, "run", req.name)
	}
}

// attemptOver tells, at most once a second, whether the Run read from the
// API server says the attempt is over: the Run is gone, has ended or was
// executed again. A manager killed during the attempt never wrote its end.
func (s *Server) attemptOver(ctx context.Context, run *afev1.Run, attempt int32) func() bool {
	var last time.Time
	return func() bool {
		if time.Since(last) < time.Second {
			return false
		}
		last = time.Now()
		now := &afev1.Run{}
		err := s.reader.Get(ctx, client.ObjectKeyFromObject(run), now)
		if apierrors.IsNotFound(err) {
			return true
		}
		if err != nil {
			return false
		}
		return now.UID != run.UID || now.Status.Phase.Terminal() || now.Status.Attempts > attempt
	}
}
