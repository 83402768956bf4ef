package telemetry

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sort"
	"time"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
)

// PrunedRecords is how many records of one kind of a sandbox the bounds
// removed, as the access API's wire type holds it.
type PrunedRecords = accessv1.PrunedRecords

// The kinds of records, each bounded apart: one namespace's egress
// decisions never take the place of its commands, nor the other way.
const (
	KindCommands = "commands"
	KindEgress   = "egress"
)

// The bounds that remove records (besides the retention).
const (
	// BoundNamespace is Options.NamespaceMaxRecords.
	BoundNamespace = "namespace"
	// BoundStore is Options.MaxBytes.
	BoundStore = "store"
)

// tables are the tables of the kinds.
var tables = map[string]string{KindCommands: "records", KindEgress: "egress"}

// Pruned is how many records of one kind of one namespace one bound
// removed.
type Pruned struct {
	Namespace, Kind, Bound string
	Records                int64
}

// PruneResult is what a Prune removed.
type PruneResult struct {
	// Expired is how many records the retention removed.
	Expired int64
	// Bounded is what the bounds removed, by namespace, kind and bound.
	Bounded []Pruned
}

// Removed is how many records were removed in all.
func (r PruneResult) Removed() int64 {
	n := r.Expired
	for _, p := range r.Bounded {
		n += p.Records
	}
	return n
}

// add counts n records of a bucket removed by bound.
func (r *PruneResult) add(b bucket, bound string, n int64) {
	for i := range r.Bounded {
		if p := &r.Bounded[i]; p.Namespace == b.namespace && p.Kind == b.kind && p.Bound == bound {
			p.Records += n
			return
		}
	}
	r.Bounded = append(r.Bounded, Pruned{Namespace: b.namespace, Kind: b.kind, Bound: bound, Records: n})
}

// bucket is one namespace's records of one kind: the unit the bounds are
// fair between. Its bytes are its records' sizes as estimated when they
// were written (recordSize).
type bucket struct {
	kind, namespace string
	n, bytes        int64
}

// Prune removes the records older than the retention; then, in each
// namespace, the oldest records of a kind beyond NamespaceMaxRecords; then,
// while the database is larger than MaxBytes, records of the largest
// buckets (a namespace's records of one kind) only: each round keeps about
// the share of the records that fits and cuts every bucket above the level
// that keeps it (max-min fairness), the oldest first, so that a bucket
// below the level loses nothing, whatever another writes. Each cut is
// noted, per sandbox, for the audit (PrunedOf). The freed pages are given
// back. A sandbox's sequence goes only once live says the sandbox is gone
// and it counted nothing for the retention (live nil keeps every
// sequence).
func (s *Store) Prune(ctx context.Context, now time.Time, live func(sandboxUID string) bool) (PruneResult, error) {
	var res PruneResult
	if s.opts.Retention > 0 {
		if err := s.expire(ctx, now.Add(-s.opts.Retention).UnixNano(), live, &res); err != nil {
			return res, err
		}
	}
	if s.opts.NamespaceMaxRecords > 0 {
		buckets, err := s.buckets(ctx)
		if err != nil {
			return res, err
		}
		for _, b := range buckets {
			if b.n > s.opts.NamespaceMaxRecords {
				if err := s.cut(ctx, b, byCount, b.n-s.opts.NamespaceMaxRecords, BoundNamespace, now, &res); err != nil {
					return res, err
				}
			}
		}
	}
	if err := s.pruneToSize(ctx, now, &res); err != nil {
		return res, err
	}
	if res.Removed() > 0 {
		_, err := s.db.ExecContext(ctx, `PRAGMA incremental_vacuum`)
		return res, err
	}
	return res, nil
}

// expire removes the records ended before cutoff, the notes of prunes
// made before it (whatever they removed would have expired by now), and
// the sequences of sandboxes gone that counted nothing since.
func (s *Store) expire(ctx context.Context, cutoff int64, live func(string) bool, res *PruneResult) error {
	for _, del := range []string{`DELETE FROM records WHERE ended < ?`, `DELETE FROM egress WHERE time < ?`} {
		r, err := s.db.ExecContext(ctx, del, cutoff)
		if err != nil {
			return err
		}
		n, _ := r.RowsAffected()
		res.Expired += n
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM pruned WHERE last < ?`, cutoff); err != nil {
		return err
	}
	if live == nil {
		return nil
	}
	return s.forgetSequences(ctx, cutoff, live)
}

// pruneToSize cuts the largest buckets, round after round, until the
// database fits MaxBytes. A round keeps the share of the records' bytes
// the database's size allows, at most nine tenths of them, so that each
// round removes something. Buckets are measured in bytes, not records: a
// namespace of few large records (long commands) does not weigh less than
// one of many small ones.
func (s *Store) pruneToSize(ctx context.Context, now time.Time, res *PruneResult) error {
	for s.opts.MaxBytes > 0 {
		size, err := s.Size(ctx)
		if err != nil || size <= s.opts.MaxBytes {
			return err
		}
		buckets, err := s.buckets(ctx)
		if err != nil {
			return err
		}
		sizes := make([]int64, len(buckets))
		var total int64
		for i, b := range buckets {
			sizes[i] = b.bytes
			total += b.bytes
		}
		keep := min(total-max(total/10, 1), int64(float64(total)*float64(s.opts.MaxBytes)/float64(size)))
		level := waterLevel(sizes, keep)
		cut := false
		for _, b := range buckets {
			if b.bytes > level {
				if err := s.cut(ctx, b, byBytes, b.bytes-level, BoundStore, now, res); err != nil {
					return err
				}
				cut = true
			}
		}
		if !cut {
			return nil
		}
		if _, err := s.db.ExecContext(ctx, `PRAGMA incremental_vacuum`); err != nil {
			return err
		}
	}
	return nil
}

// waterLevel is the highest level such that the buckets of these counts,
// each cut to it, hold at most keep records in all: the largest lose, a
// bucket at or below the level keeps everything.
func waterLevel(counts []int64, keep int64) int64 {
	sorted := slices.Clone(counts)
	slices.Sort(sorted)
	rest := max(keep, 0)
	for i, c := range sorted {
		share := rest / int64(len(sorted)-i)
		if c > share {
			return share
		}
		rest -= c
	}
	if len(sorted) == 0 {
		return 0
	}
	return sorted[len(sorted)-1]
}

// buckets counts the records of each namespace and kind, and adds up their
// sizes (from the namespace indexes alone), largest first.
func (s *Store) buckets(ctx context.Context) ([]bucket, error) {
	var out []bucket
	for _, kind := range []string{KindCommands, KindEgress} {
		rows, err := s.db.QueryContext(ctx, `SELECT namespace, COUNT(*), SUM(size) FROM `+tables[kind]+` INDEXED BY `+tables[kind]+`_namespace GROUP BY namespace`)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			b := bucket{kind: kind}
			if err := rows.Scan(&b.namespace, &b.n, &b.bytes); err != nil {
				_ = rows.Close()
				return nil, err
			}
			out = append(out, b)
		}
		if err := errors.Join(rows.Close(), rows.Err()); err != nil {
			return nil, err
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].bytes > out[j].bytes })
	return out, nil
}

// What a cut's amount counts.
const (
	byCount = iota
	byBytes
)

// cut removes the oldest records of a bucket, the amount records (byCount)
// or the fewest whose sizes reach it (byBytes), in one transaction: one
// statement finds the newest to go, one notes, per sandbox, how many go and
// the newest sequence number among them, one deletes them (each through
// the namespace index).
func (s *Store) cut(ctx context.Context, b bucket, by int, amount int64, bound string, now time.Time, res *PruneResult) error {
	table := tables[b.kind]
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	sq := cutSQL(table)
	last, arg := sq.byCount, amount-1
	if by == byBytes {
		last, arg = sq.byBytes, amount
	}
	var through int64
	err = tx.QueryRowContext(ctx, last, b.namespace, arg).Scan(&through)
	if errors.Is(err, sql.ErrNoRows) {
		err = tx.QueryRowContext(ctx, sq.newest, b.namespace).Scan(&through) // fewer than asked: all
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil // removed meanwhile by the retention
	}
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, sq.note, b.kind, now.UnixNano(), b.namespace, through); err != nil {
		return err
	}
	r, err := tx.ExecContext(ctx, sq.del, b.namespace, through)
	if err != nil {
		return err
	}
	removed, _ := r.RowsAffected()
	if err := tx.Commit(); err != nil {
		return err
	}
	res.add(b, bound, removed)
	return nil
}

// cutStatements are what cut runs on a table.
type cutStatements struct {
	// byCount, byBytes and newest find the ID of the newest record to go
	// (the namespace, and how many go before it, or the bytes that go);
	// newest when every record goes (the namespace).
	byCount, byBytes, newest string
	// note notes what goes (the kind, the time, the namespace, that ID),
	// del deletes it (the namespace, that ID).
	note, del string
}

// cutSQL is what cut runs on a table; each statement finds its rows by
// the namespace index.
func cutSQL(table string) cutStatements {
	var c cutStatements
	c.byCount = `SELECT id FROM ` + table + ` WHERE namespace = ? ORDER BY id LIMIT 1 OFFSET ?`
	c.byBytes = `SELECT id FROM (SELECT id, SUM(size) OVER (ORDER BY id) AS upto FROM ` + table + ` WHERE namespace = ?) WHERE upto >= ? ORDER BY id LIMIT 1`
	c.newest = `SELECT MAX(id) FROM ` + table + ` WHERE namespace = ? HAVING COUNT(*) > 0`
	c.note = `INSERT INTO pruned (namespace, sandbox, sandbox_uid, ticket, kind, records, through_seq, last)
		SELECT namespace, sandbox, sandbox_uid, ticket, ?, COUNT(*), MAX(seq), ? FROM ` + table + ` WHERE namespace = ? AND id <= ? GROUP BY sandbox_uid
		ON CONFLICT (sandbox_uid, kind) DO UPDATE SET records = records + excluded.records,
		through_seq = MAX(through_seq, excluded.through_seq), last = excluded.last`
	c.del = `DELETE FROM ` + table + ` WHERE namespace = ? AND id <= ?`
	return c
}

// PrunedOf lists, per sandbox the filter selects, what the bounds removed
// of its records of a kind (KindCommands, KindEgress), the sandbox last
// pruned last.
func (s *Store) PrunedOf(ctx context.Context, f Filter, kind string) ([]PrunedRecords, error) {
	col, val, err := f.selector()
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT sandbox, sandbox_uid, records, through_seq, last FROM pruned
		WHERE namespace = ? AND `+col+` = ? AND kind = ? ORDER BY last, sandbox_uid`, f.Namespace, val, kind)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []PrunedRecords
	for rows.Next() {
		var p PrunedRecords
		var last int64
		if err := rows.Scan(&p.Sandbox, &p.SandboxUID, &p.Records, &p.ThroughSeq, &last); err != nil {
			return nil, err
		}
		p.Last = time.Unix(0, last).UTC()
		out = append(out, p)
	}
	return out, rows.Err()
}
