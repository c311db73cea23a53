package padlock

import (
	"fmt"
	"log/slog"
	"time"
)

// ErrNotReplicated is returned by an acquire with Replicas whose grant did
// not reach enough replicas in time: the grant was given back. It is an
// ErrNotAcquired too.
var ErrNotReplicated = fmt.Errorf("%w: not on enough replicas", ErrNotAcquired)

// Replicas makes a fresh acquire wait until n replicas have the grant
// (WAIT n timeout on the keeper connection), so that a failover within that
// time cannot hand the lock to another holder. Short of them the grant is
// given back and the acquire fails with ErrNotReplicated; with
// ReplicasWarnOnly it is kept and logged (log/slog). A final release waits
// the same way and logs a shortfall. The WAIT holds the Client's keeper
// connection (shared by its holds on that node) for up to timeout while a
// replica lags.
func Replicas(n int, timeout time.Duration) Option {
	return func(o *options) { o.replicas, o.replicaTimeout = n, timeout }
}

// ReplicasWarnOnly keeps a grant short of its replicas (see Replicas), with
// a warning, instead of giving it back.
func ReplicasWarnOnly() Option { return func(o *options) { o.replicaWarn = true } }

// ReplicasAOF also waits until the replicas wrote the grant to their AOF
// (WAITAOF 0 n timeout; Redis 7.2 and later).
func ReplicasAOF() Option { return func(o *options) { o.replicaAOF = true } }

// replicated is whether enough replicas have every write of this hold so
// far, and why not; rewrite: the grant may have been written on another
// connection (mailed), so a renewal on the keeper comes first, which WAIT
// then counts from.
func (h *hold) replicated(rewrite bool) (bool, string) {
	if rewrite && !h.renewLocked() {
		return false, "the grant could not be written again on the keeper"
	}
	h.st.Lock()
	written := h.written
	h.st.Unlock()
	ms := itoa(max(h.o.replicaTimeout.Milliseconds(), 1))
	limit := h.o.replicaTimeout + callTimeout
	reply, epoch, err := h.k.call([]any{"WAIT", itoa(int64(h.o.replicas)), ms}, limit)
	got, _ := asInt(reply)
	if err == nil && h.o.replicaAOF {
		var both any
		both, epoch, err = h.k.call([]any{"WAITAOF", "0", itoa(int64(h.o.replicas)), ms}, limit)
		if pair, ok := both.([]any); ok && len(pair) == 2 {
			n, _ := asInt(pair[1])
			got = min(got, n)
		}
	}
	switch {
	case err != nil:
		return false, "the replicas could not be asked: " + err.Error()
	case epoch != written:
		return false, "the keeper connection was replaced before the replicas could be asked"
	case got < int64(h.o.replicas):
		return false, fmt.Sprintf("%d of %d replicas had it within %v", got, h.o.replicas, h.o.replicaTimeout)
	}
	return true, ""
}

// grantReplicated is a fresh grant's check (caller holds h.mu): false when
// it was short of its replicas and given back.
func (h *hold) grantReplicated(rewrite bool) (bool, string) {
	ok, why := h.replicated(rewrite)
	if ok {
		return true, ""
	}
	if h.o.replicaWarn {
		slog.Warn("padlock: granted, but short of its replicas", "key", h.s.route(), "holder", h.holder, "why", why)
		return true, ""
	}
	// Given back without waiting for the replicas again.
	n := h.o.replicas
	h.o.replicas = 0
	_ = h.release(nil)
	h.o.replicas = n
	return false, why
}
