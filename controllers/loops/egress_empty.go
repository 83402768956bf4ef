package loops

import (
	"context"
	"time"

	"afe.dev/sandbox/internal/egresslog"
	"afe.dev/sandbox/internal/metrics"
	"afe.dev/sandbox/internal/telemetry"
)

// emptyWindow bounds the time one record of connections that carried no
// request spans: a proxy's flood of them makes one record each window,
// not one each.
const emptyWindow = 10 * time.Second

// aggregate counts a connection that carried no request into p.empty,
// recording first the aggregate it ends when that began a window before.
// p.mu is held.
func (p *proxyLog) aggregate(d egresslog.Decision) error {
	if err := p.flushLocked(d.Time.Add(-emptyWindow)); err != nil {
		return err
	}
	e := &p.empty
	if e.Record.Connections == 0 {
		e.Record = egressRecord(p.id, p.proxy, d)
		e.Record.Duration.Duration, e.Record.BytesUp, e.Record.BytesDown = 0, 0, 0
	}
	e.Record.Connections++
	e.Record.Duration.Duration = d.Time.Sub(e.Record.Time)
	e.Record.BytesUp += d.BytesUp
	e.Record.BytesDown += d.BytesDown
	e.Cursor = telemetry.Cursor{At: p.at, N: p.n}
	return nil
}

// flushEmpty records the aggregate of connections without a request when
// it began at or before the time given (zero: whenever it began).
func (p *proxyLog) flushEmpty(before time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.flushLocked(before)
}

// finish records what is aggregated through add, at the follow's end; if
// it cannot, a follow started again reads it again.
func (p *proxyLog) finish(add func(telemetry.Egress) error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.add = add
	_ = p.flushLocked(time.Time{})
}

// flushLocked is flushEmpty with p.mu held. The record keeps the place of
// its last line, so that a follow started again reads nothing of it twice
// and, before it is recorded, loses none of it.
func (p *proxyLog) flushLocked(before time.Time) error {
	e := p.empty
	if e.Record.Connections == 0 || !before.IsZero() && e.Record.Time.After(before) {
		return nil
	}
	if p.running != nil {
		e.Record.Running = p.running(p.id.UID, e.Record.Time, e.Record.Time.Add(e.Record.Duration.Duration))
	}
	if err := p.add(e); err != nil {
		return err
	}
	metrics.EgressEmptyConnections.Add(float64(e.Record.Connections))
	p.empty = telemetry.Egress{}
	return nil
}

// flushEvery records, every period until ctx ends, the aggregate that
// began a window ago: a flood that stopped is recorded without waiting
// for the proxy's next line.
func (p *proxyLog) flushEvery(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			_ = p.flushEmpty(now.Add(-emptyWindow))
		}
	}
}
