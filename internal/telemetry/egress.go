package telemetry

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
)

// EgressRecord is one decision of a sandbox's egress proxy, as the access
// API's wire type holds it.
type EgressRecord = accessv1.EgressRecord

// EgressListKind is the kind of a list of egress records.
const EgressListKind = accessv1.EgressRecordListKind

// EgressRecordList is a list of egress records, in order.
type EgressRecordList = accessv1.EgressRecordList

// Egress is an egress record and the place of its line in its proxy's log:
// the engine's timestamp of the line and its rank among the lines of that
// timestamp (0, 1, ...). A follower that starts again reads the log from
// the last place recorded (EgressCursor) and skips what it recorded.
type Egress struct {
	Record EgressRecord
	Cursor Cursor
}

// Cursor is a place in a proxy's log.
type Cursor struct {
	At time.Time
	N  int
}

// After is true when the line at (at, n) comes after c.
func (c Cursor) After(at time.Time, n int) bool {
	return at.After(c.At) || at.Equal(c.At) && n > c.N
}

// AddEgress queues an egress record, waiting while the queue is full
// until ctx ends (its error then, the record not queued). Unlike a
// command's record, an egress record can wait: the proxy's log, kept by
// the engine, holds the lines not recorded yet, so a reader that waits
// loses nothing where one that dropped would.
func (s *Store) AddEgress(ctx context.Context, e Egress) error {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return errors.New("the telemetry store is closed")
		}
		select {
		case s.in <- pending{egress: &e}:
			s.mu.Unlock()
			return nil
		default:
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.room:
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func insertEgress(ctx context.Context, tx *sql.Tx, e *Egress) error {
	r := &e.Record
	running, _ := json.Marshal(r.Running)
	_, err := tx.ExecContext(ctx, `INSERT INTO egress (namespace, sandbox, sandbox_uid, ticket, seq, time, duration,
		method, host, port, decision, reason, status, bytes_up, bytes_down, running, proxy, log_time, log_n, connections, size)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.Namespace, r.Sandbox, r.SandboxUID, r.Ticket, r.Seq, r.Time.UnixNano(), int64(r.Duration.Duration),
		r.Method, r.Host, r.Port, r.Decision, r.Reason, r.Status, r.BytesUp, r.BytesDown, string(running), r.Proxy,
		e.Cursor.At.UnixNano(), e.Cursor.N, r.Connections,
		recordSize(r.Namespace, r.Sandbox, r.SandboxUID, r.Ticket, r.Method, r.Host, r.Decision, r.Reason, r.Status, string(running), r.Proxy))
	return err
}

// EgressFilter selects egress records: those Filter selects, with
// DeniedOnly the denied ones only.
type EgressFilter struct {
	Filter
	DeniedOnly bool
}

// ListEgress returns the egress records the filter selects, the newest
// Limit of them, in the order they were committed.
func (s *Store) ListEgress(ctx context.Context, f EgressFilter) ([]EgressRecord, error) {
	col, val, err := f.selector()
	if err != nil {
		return nil, err
	}
	denied := ""
	if f.DeniedOnly {
		denied = ` AND decision = '` + accessv1.EgressDenied + `'`
	}
	rows, err := s.db.QueryContext(ctx, `SELECT namespace, sandbox, sandbox_uid, ticket, seq, time, duration, method, host, port,
		decision, reason, status, bytes_up, bytes_down, running, proxy, connections FROM (
		SELECT * FROM egress WHERE namespace = ? AND `+col+` = ?`+denied+` ORDER BY id DESC LIMIT ?) ORDER BY id`, f.Namespace, val, f.Limit)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []EgressRecord
	for rows.Next() {
		var r EgressRecord
		var at, dur int64
		var running string
		if err := rows.Scan(&r.Namespace, &r.Sandbox, &r.SandboxUID, &r.Ticket, &r.Seq, &at, &dur, &r.Method, &r.Host, &r.Port,
			&r.Decision, &r.Reason, &r.Status, &r.BytesUp, &r.BytesDown, &running, &r.Proxy, &r.Connections); err != nil {
			return nil, err
		}
		r.Time, r.Duration = time.Unix(0, at).UTC(), metav1.Duration{Duration: time.Duration(dur)}
		_ = json.Unmarshal([]byte(running), &r.Running)
		out = append(out, r)
	}
	return out, rows.Err()
}

// EgressCursor is the place in the log of the proxy container (by ID) of
// the last egress record written from it; false when none was.
func (s *Store) EgressCursor(ctx context.Context, proxy string) (Cursor, bool, error) {
	var at, n int64
	err := s.db.QueryRowContext(ctx, `SELECT log_time, log_n FROM egress WHERE proxy = ? ORDER BY log_time DESC, log_n DESC LIMIT 1`, proxy).Scan(&at, &n)
	if errors.Is(err, sql.ErrNoRows) {
		return Cursor{}, false, nil
	}
	if err != nil {
		return Cursor{}, false, err
	}
	return Cursor{At: time.Unix(0, at).UTC(), N: int(n)}, true, nil
}

// EgressTotal is what a sandbox's egress records add up to.
type EgressTotal struct {
	// Bytes both ways, and the requests denied.
	Bytes, Denials int64
}

// EgressTotals adds up the egress records of each sandbox, by Sandbox UID
// (a record of connections that carried no request counts each of them).
func (s *Store) EgressTotals(ctx context.Context) (map[string]EgressTotal, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT sandbox_uid, SUM(bytes_up + bytes_down),
		SUM(CASE WHEN decision = '`+accessv1.EgressDenied+`' THEN MAX(connections, 1) ELSE 0 END)
		FROM egress GROUP BY sandbox_uid`)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	out := map[string]EgressTotal{}
	for rows.Next() {
		var uid string
		var t EgressTotal
		if err := rows.Scan(&uid, &t.Bytes, &t.Denials); err != nil {
			return nil, err
		}
		out[uid] = t
	}
	return out, rows.Err()
}
