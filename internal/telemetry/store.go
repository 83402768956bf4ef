// Package telemetry keeps the record of every command executed in a
// sandbox, and of every decision of its egress proxy, in an embedded SQLite
// database: ordered per sandbox by one sequence number with no gaps (the
// commands and the egress records share it), also across restarts, written
// in batches by one writer so that recording never waits on the disk.
package telemetry

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the pure-Go driver, "sqlite"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
)

// Record is one command executed in a sandbox, as the access API's wire
// type (api/access/v1alpha1) holds it.
type Record = accessv1.CommandRecord

// ListKind is the kind of a list of records as the access API answers it.
const ListKind = accessv1.CommandRecordListKind

// RecordList is a list of records, in order, as the access API answers it.
type RecordList = accessv1.CommandRecordList

// The sources of a record.
const (
	SourceRun     = "Run"
	SourceBuiltin = "Builtin"
	SourceAPI     = "API"
	SourceEngine  = "Engine"
)

// ExitClass words an exit code for the metrics: ok, error (1-127), signal
// (128 and up: killed), unknown (below 0: its end was not seen).
func ExitClass(code int) string {
	switch {
	case code == 0:
		return "ok"
	case code > 0 && code < 128:
		return "error"
	case code < 0:
		return "unknown"
	}
	return "signal"
}

// Options bound the store.
type Options struct {
	// Retention is how long records are kept (0: for ever).
	Retention time.Duration
	// MaxBytes bounds the database's size (0: no bound). Past it, records
	// go from the namespaces that hold the most of a kind, the oldest
	// first, never from one that holds less than they keep (Prune).
	MaxBytes int64
	// NamespaceMaxRecords bounds the records of each kind (commands,
	// egress decisions) one namespace keeps; its oldest go first (0: no
	// bound).
	NamespaceMaxRecords int64
	// Batch is the most records written in one transaction (default 256).
	Batch int
	// Queue is how many records wait for the writer before Add drops one
	// (default 8192).
	Queue int
}

// Store is the database and its writer.
type Store struct {
	db   *sql.DB
	opts Options
	in   chan pending
	// mu guards closed and the sends on in.
	mu     sync.Mutex
	closed bool
	done   chan struct{}
	// room is signalled (without waiting) after each batch taken off the
	// queue, for AddEgress waiting on a full queue.
	room    chan struct{}
	dropped atomic.Int64
	// written counts committed records, for the metrics.
	written atomic.Int64
	// OnCommit, when set before the first Add, is called after each
	// committed batch with its command records (sequence numbers set).
	OnCommit func([]Record)
	// OnEgress, when set before the first AddEgress, is called with each
	// committed egress record.
	OnEgress func(EgressRecord)
}

type pending struct {
	rec    Record
	egress *Egress    // an egress record when not nil
	flush  chan error // a flush marker when not nil
}

const schema = `
CREATE TABLE IF NOT EXISTS records (
	id            INTEGER PRIMARY KEY AUTOINCREMENT,
	namespace     TEXT NOT NULL,
	sandbox       TEXT NOT NULL,
	sandbox_uid   TEXT NOT NULL,
	ticket        TEXT NOT NULL,
	seq           INTEGER NOT NULL,
	started       INTEGER NOT NULL,
	ended         INTEGER NOT NULL,
	command       TEXT NOT NULL,
	user          TEXT NOT NULL,
	exit_code     INTEGER NOT NULL,
	run           TEXT NOT NULL,
	attempt       INTEGER NOT NULL,
	output_bytes  INTEGER NOT NULL,
	output_sha256 TEXT NOT NULL,
	source        TEXT NOT NULL,
	started_by    TEXT NOT NULL,
	UNIQUE (sandbox_uid, seq)
);
CREATE INDEX IF NOT EXISTS records_sandbox ON records (namespace, sandbox, id);
CREATE INDEX IF NOT EXISTS records_ticket ON records (namespace, ticket, id);
CREATE INDEX IF NOT EXISTS records_ended ON records (ended);
CREATE TABLE IF NOT EXISTS egress (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	namespace   TEXT NOT NULL,
	sandbox     TEXT NOT NULL,
	sandbox_uid TEXT NOT NULL,
	ticket      TEXT NOT NULL,
	seq         INTEGER NOT NULL,
	time        INTEGER NOT NULL,
	duration    INTEGER NOT NULL,
	method      TEXT NOT NULL,
	host        TEXT NOT NULL,
	port        INTEGER NOT NULL,
	decision    TEXT NOT NULL,
	reason      TEXT NOT NULL,
	status      TEXT NOT NULL,
	bytes_up    INTEGER NOT NULL,
	bytes_down  INTEGER NOT NULL,
	running     TEXT NOT NULL,
	proxy       TEXT NOT NULL,
	log_time    INTEGER NOT NULL,
	log_n       INTEGER NOT NULL,
	UNIQUE (sandbox_uid, seq)
);
CREATE INDEX IF NOT EXISTS egress_sandbox ON egress (namespace, sandbox, id);
CREATE INDEX IF NOT EXISTS egress_ticket ON egress (namespace, ticket, id);
CREATE INDEX IF NOT EXISTS egress_time ON egress (time);
CREATE INDEX IF NOT EXISTS egress_proxy ON egress (proxy, log_time, log_n);
CREATE TABLE IF NOT EXISTS sequences (
	sandbox_uid TEXT PRIMARY KEY,
	last_seq    INTEGER NOT NULL,
	updated     INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS pruned (
	namespace   TEXT NOT NULL,
	sandbox     TEXT NOT NULL,
	sandbox_uid TEXT NOT NULL,
	ticket      TEXT NOT NULL,
	kind        TEXT NOT NULL,
	records     INTEGER NOT NULL,
	through_seq INTEGER NOT NULL,
	last        INTEGER NOT NULL,
	PRIMARY KEY (sandbox_uid, kind)
);
CREATE INDEX IF NOT EXISTS pruned_sandbox ON pruned (namespace, sandbox);
CREATE INDEX IF NOT EXISTS pruned_ticket ON pruned (namespace, ticket);`

// added are the columns later versions added, with their type: a
// record's size is its estimate (recordSize) for the fair bounds, an
// earlier version's records taken as of a typical size.
var added = []struct{ table, column, decl string }{
	{"egress", "connections", "INTEGER NOT NULL DEFAULT 0"},
	{"records", "size", "INTEGER NOT NULL DEFAULT 300"},
	{"egress", "size", "INTEGER NOT NULL DEFAULT 300"},
}

// namespaceIndexes are what the fair bounds read and cut by: a namespace's
// records in order, with their sizes (covering the sums).
const namespaceIndexes = `
CREATE INDEX IF NOT EXISTS records_namespace ON records (namespace, id, size);
CREATE INDEX IF NOT EXISTS egress_namespace ON egress (namespace, id, size);`

// migrate makes the tables and indexes missing, and adds the columns a
// database made by an earlier version lacks.
func migrate(db *sql.DB) error {
	if _, err := db.Exec(schema); err != nil {
		return err
	}
	for _, a := range added {
		var has bool
		if err := db.QueryRow(`SELECT COUNT(*) > 0 FROM pragma_table_info(?) WHERE name = ?`, a.table, a.column).Scan(&has); err != nil {
			return err
		}
		if !has {
			if _, err := db.Exec(`ALTER TABLE ` + a.table + ` ADD COLUMN ` + a.column + ` ` + a.decl); err != nil {
				return err
			}
		}
	}
	_, err := db.Exec(namespaceIndexes)
	return err
}

// Open opens (or makes) the database at path, in WAL mode with full
// synchronous commits: a record is on disk once its batch is committed, so
// a crash of the process loses nothing a Flush acknowledged.
func Open(path string, opts Options) (*Store, error) {
	if opts.Batch <= 0 {
		opts.Batch = 256
	}
	if opts.Queue <= 0 {
		opts.Queue = 8192
	}
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=auto_vacuum(INCREMENTAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open the telemetry database %s: %w", path, err)
	}
	db.SetMaxOpenConns(4)
	if err := migrate(db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("the telemetry database %s: %w", path, err)
	}
	s := &Store{db: db, opts: opts, in: make(chan pending, opts.Queue), done: make(chan struct{}), room: make(chan struct{}, 1)}
	go s.write()
	return s, nil
}

// Add queues a record; it never blocks. A record that finds the queue full
// is dropped and counted (Dropped): the queue holds seconds of records at
// the writer's pace, so only a stalled disk can fill it.
func (s *Store) Add(r Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.dropped.Add(1)
		return
	}
	select {
	case s.in <- pending{rec: r}:
	default:
		s.dropped.Add(1)
	}
}

// Flush waits until every record added before it is committed.
func (s *Store) Flush(ctx context.Context) error {
	done := make(chan error, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("the telemetry store is closed")
	}
	select {
	case s.in <- pending{flush: done}:
		s.mu.Unlock()
	case <-ctx.Done():
		s.mu.Unlock()
		return ctx.Err()
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Dropped is how many records found the queue full, or could not be
// committed (commitRetrying).
func (s *Store) Dropped() int64 { return s.dropped.Load() }

// Close commits what is queued and closes the database.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.in)
	<-s.done
	return s.db.Close()
}

// write is the one writer: it takes what is queued, up to a batch, and
// commits it in one transaction, giving each record its sandbox's next
// sequence number.
func (s *Store) write() {
	defer close(s.done)
	for {
		first, ok := <-s.in
		if !ok {
			return
		}
		batch := []pending{first}
	more:
		for len(batch) < s.opts.Batch {
			select {
			case p, ok := <-s.in:
				if !ok {
					break more
				}
				batch = append(batch, p)
			default:
				break more
			}
		}
		select {
		case s.room <- struct{}{}:
		default:
		}
		var recs []pending
		for _, p := range batch {
			if p.flush == nil {
				recs = append(recs, p)
			}
		}
		err := s.commitRetrying(recs)
		for _, p := range batch {
			if p.flush != nil {
				p.flush <- err
			}
		}
	}
}

// commitAttempts is how many times a batch is tried before its records
// are given up (and counted as dropped); commitBackoff is the first wait
// between tries, doubled at each.
const (
	commitAttempts = 5
	commitBackoff  = 50 * time.Millisecond
)

// commitRetrying commits a batch, trying again when the database refuses
// it (a lock held past the busy timeout, say): a transaction that failed
// was rolled back whole, so a retry numbers the batch afresh. A batch
// that fails every try is counted as dropped, never lost unsaid.
func (s *Store) commitRetrying(batch []pending) error {
	wait := commitBackoff
	var err error
	for range commitAttempts {
		if err = s.commit(batch); err == nil {
			return nil
		}
		time.Sleep(wait)
		wait *= 2
	}
	s.dropped.Add(int64(len(batch)))
	return err
}

func (s *Store) commit(batch []pending) error {
	if len(batch) == 0 {
		return nil
	}
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	next := map[string]int64{}
	var recs []Record
	for i := range batch {
		p := &batch[i]
		uid := p.rec.SandboxUID
		if p.egress != nil {
			uid = p.egress.Record.SandboxUID
		}
		seq, ok := next[uid]
		if !ok {
			if err := tx.QueryRowContext(ctx, `SELECT COALESCE((SELECT last_seq FROM sequences WHERE sandbox_uid = ?), 0)`, uid).Scan(&seq); err != nil {
				return err
			}
		}
		seq++
		next[uid] = seq
		if p.egress != nil {
			p.egress.Record.Seq = seq
			err = insertEgress(ctx, tx, p.egress)
		} else {
			p.rec.Seq = seq
			err = insertRecord(ctx, tx, &p.rec)
			recs = append(recs, p.rec)
		}
		if err != nil {
			return err
		}
	}
	now := time.Now().UnixNano()
	for uid, seq := range next {
		if _, err := tx.ExecContext(ctx, `INSERT INTO sequences (sandbox_uid, last_seq, updated) VALUES (?, ?, ?)
			ON CONFLICT (sandbox_uid) DO UPDATE SET last_seq = excluded.last_seq, updated = excluded.updated`, uid, seq, now); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.committed(batch, recs)
	return nil
}

// committed counts a committed batch and tells the callbacks of its
// commands (recs) and of its egress records.
func (s *Store) committed(batch []pending, recs []Record) {
	s.written.Add(int64(len(batch)))
	if s.OnCommit != nil && len(recs) > 0 {
		s.OnCommit(recs)
	}
	if s.OnEgress != nil {
		for _, p := range batch {
			if p.egress != nil {
				s.OnEgress(p.egress.Record)
			}
		}
	}
}

func insertRecord(ctx context.Context, tx *sql.Tx, r *Record) error {
	cmd, _ := json.Marshal(r.Command)
	size := recordSize(r.Namespace, r.Sandbox, r.SandboxUID, r.Ticket, string(cmd), r.User, r.Run, r.OutputSHA256, r.Source, r.StartedBy)
	_, err := tx.ExecContext(ctx, `INSERT INTO records (namespace, sandbox, sandbox_uid, ticket, seq, started, ended,
		command, user, exit_code, run, attempt, output_bytes, output_sha256, source, started_by, size)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.Namespace, r.Sandbox, r.SandboxUID, r.Ticket, r.Seq, r.Started.UnixNano(), r.Ended.UnixNano(),
		string(cmd), r.User, r.ExitCode, r.Run, r.Attempt, r.OutputBytes, r.OutputSHA256, r.Source, r.StartedBy, size)
	return err
}

// recordSize estimates the bytes a record takes: its text, and a fixed
// share for its numbers, the row's header and its index entries.
func recordSize(texts ...string) int64 {
	n := int64(rowOverhead)
	for _, t := range texts {
		n += int64(len(t))
	}
	return n
}

// rowOverhead is recordSize's fixed share of a record.
const rowOverhead = 200

// Filter selects records: of one sandbox (by name, every UID it had) or of
// one ticket, in a namespace.
type Filter struct {
	Namespace string
	Sandbox   string
	Ticket    string
	// Limit bounds the answer (0: 1000).
	Limit int
}

// selector checks the filter, sets its default Limit, and names the
// column and value it selects by (a sandbox, or a ticket).
func (f *Filter) selector() (col, val string, err error) {
	if f.Namespace == "" || (f.Sandbox == "") == (f.Ticket == "") {
		return "", "", errors.New("a namespace and one of a sandbox or a ticket")
	}
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	if f.Ticket != "" {
		return "ticket", f.Ticket, nil
	}
	return "sandbox", f.Sandbox, nil
}

// List returns the records the filter selects, in the order they were
// committed (per sandbox UID, by sequence).
func (s *Store) List(ctx context.Context, f Filter) ([]Record, error) {
	col, val, err := f.selector()
	if err != nil {
		return nil, err
	}
	// The newest Limit records, in order.
	rows, err := s.db.QueryContext(ctx, `SELECT namespace, sandbox, sandbox_uid, ticket, seq, started, ended, command, user,
		exit_code, run, attempt, output_bytes, output_sha256, source, started_by FROM (
		SELECT * FROM records WHERE namespace = ? AND `+col+` = ? ORDER BY id DESC LIMIT ?) ORDER BY id`, f.Namespace, val, f.Limit)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []Record
	for rows.Next() {
		var r Record
		var started, ended int64
		var cmd string
		if err := rows.Scan(&r.Namespace, &r.Sandbox, &r.SandboxUID, &r.Ticket, &r.Seq, &started, &ended, &cmd, &r.User,
			&r.ExitCode, &r.Run, &r.Attempt, &r.OutputBytes, &r.OutputSHA256, &r.Source, &r.StartedBy); err != nil {
			return nil, err
		}
		r.Started, r.Ended = time.Unix(0, started).UTC(), time.Unix(0, ended).UTC()
		_ = json.Unmarshal([]byte(cmd), &r.Command)
		out = append(out, r)
	}
	return out, rows.Err()
}

// forgetSequences removes the sequences that counted nothing since cutoff
// of sandboxes that are gone (a UID is never used again).
func (s *Store) forgetSequences(ctx context.Context, cutoff int64, live func(string) bool) error {
	rows, err := s.db.QueryContext(ctx, `SELECT sandbox_uid FROM sequences WHERE updated < ?`, cutoff)
	if err != nil {
		return err
	}
	var gone []string
	for rows.Next() {
		var uid string
		if err := rows.Scan(&uid); err != nil {
			_ = rows.Close()
			return err
		}
		if !live(uid) {
			gone = append(gone, uid)
		}
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, uid := range gone {
		if _, err := s.db.ExecContext(ctx, `DELETE FROM sequences WHERE sandbox_uid = ? AND updated < ?`, uid, cutoff); err != nil {
			return err
		}
	}
	return nil
}

// Size is the bytes the database's pages in use take (its free pages left
// out).
func (s *Store) Size(ctx context.Context) (int64, error) {
	var pages, free, size int64
	if err := s.db.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		return 0, err
	}
	if err := s.db.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
		return 0, err
	}
	if err := s.db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&size); err != nil {
		return 0, err
	}
	return (pages - free) * size, nil
}

// Written is how many records were committed since Open.
func (s *Store) Written() int64 { return s.written.Load() }

// Output measures an output stream: its size and SHA-256. Write never
// fails.
type Output struct {
	mu sync.Mutex
	n  int64
	h  hash.Hash
}

// NewOutput starts a measure.
func NewOutput() *Output { return &Output{h: sha256.New()} }

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n += int64(len(p))
	o.h.Write(p)
	return len(p), nil
}

// Sum returns the size and the hex SHA-256 of what was written.
func (o *Output) Sum() (int64, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n, hex.EncodeToString(o.h.Sum(nil))
}
